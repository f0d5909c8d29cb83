// Issue 37 in the core: the hub's reply parsers and hash, the bounded cache scan, and outputs that
// never clobber. The end-to-end cases (a hostile server, the CLI) are tests/test_hub_hostile.py and
// tests/test_hostile37.py.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "core/io/hub.h"
#include "core/io/io.h"

namespace {

std::string temp_dir(const char* name) {
    std::string tpl = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/vitscope37-" + name + "-XXXXXX";
    return ::mkdtemp(tpl.data());
}
std::string slurp(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}
void put(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

}  // namespace

// FIPS 180-4 test vectors (and the empty string, as sha256sum gives it).
TEST(Issue37, Sha256AgainstPublishedVectors) {
    EXPECT_EQ(vit::hub::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(vit::hub::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(vit::hub::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const std::string d = temp_dir("sha");
    put(d + "/a", std::string(1000000, 'a'));
    EXPECT_EQ(vit::hub::sha256_file(d + "/a"), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    EXPECT_TRUE(vit::hub::is_sha256("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
    EXPECT_FALSE(vit::hub::is_sha256("CDC76E5C9914FB9281A1C7E284D73E67F1809A48A497200E046D39CCC7112CD0"));
    EXPECT_FALSE(vit::hub::is_sha256("9b3bc5e5ed06eb5b2fdc1d1e0e0ecf5a0fbc2a2f"));  // a git sha1: not checked as sha256
}

TEST(Issue37, SizeHeadersParsedStrictly) {
    using vit::hub::parse_size;
    EXPECT_EQ(parse_size("0", "X-Linked-Size"), 0u);
    EXPECT_EQ(parse_size("198100", "X-Linked-Size"), 198100u);
    EXPECT_EQ(parse_size(std::to_string(vit::hub::kMaxDownloadBytes), "X-Linked-Size"), vit::hub::kMaxDownloadBytes);
    for (const char* bad : {"-1", "-0", "+5", " 5", "5 ", "1e3", "0x10", "", "12a", "18446744073709551615",
                            "18446744073709551616", "99999999999999999999999"}) {
        const std::string e = error_of([&] { parse_size(bad, "X-Linked-Size"); });
        EXPECT_NE(e.find("X-Linked-Size '"), std::string::npos) << bad << ": " << e;
    }
    EXPECT_NE(error_of([] { parse_size(std::to_string(vit::hub::kMaxDownloadBytes + 1), "Content-Length"); }).find("64 GiB"),
              std::string::npos);
}

TEST(Issue37, ContentRangeAndHeadFields) {
    uint64_t b, e, t;
    EXPECT_TRUE(vit::hub::parse_content_range("bytes 100-199/200", b, e, t));
    EXPECT_EQ(b, 100u);
    EXPECT_EQ(e, 199u);
    EXPECT_EQ(t, 200u);
    EXPECT_TRUE(vit::hub::parse_content_range("bytes 0-9/*", b, e, t));
    EXPECT_EQ(t, 0u);
    for (const char* bad : {"bytes -1-5/10", "bytes 5-4/10", "bytes 0-10/10", "bytes 0-9/10 ", "bytes=0-9/10", "bytes 0-9",
                            "bytes 0-9/", "", "bytes 99999999999999999999-1/2"})
        EXPECT_FALSE(vit::hub::parse_content_range(bad, b, e, t)) << bad;

    long status = 0;
    std::map<std::string, std::string> h;
    vit::hub::parse_header_line("HTTP/1.1 302 Found\r\n", status, h);
    vit::hub::parse_header_line("X-Repo-Commit: abc123\r\n", status, h);
    vit::hub::parse_header_line("X-Linked-Etag: \"0123\"\r\n", status, h);
    vit::hub::parse_header_line("X-Linked-Size:  -1 \r\n", status, h);
    vit::hub::parse_header_line("Location: /cdn/x\r\n", status, h);
    EXPECT_EQ(status, 302);
    EXPECT_EQ(h.at("x-linked-size"), "-1");
    EXPECT_NE(error_of([&] { vit::hub::head_fields(status, h); }).find("X-Linked-Size '-1'"), std::string::npos);
    h["x-linked-size"] = "42";
    const vit::hub::HeadFields f = vit::hub::head_fields(status, h);
    EXPECT_EQ(f.size, 42u);
    EXPECT_EQ(f.etag, "0123");
    EXPECT_EQ(f.location, "/cdn/x");
    h.erase("x-linked-size");
    EXPECT_NE(error_of([&] { vit::hub::head_fields(status, h); }).find("no size"), std::string::npos);
    vit::hub::parse_header_line("HTTP/1.1 2", status, h);  // a new response: the old headers go
    EXPECT_EQ(status, 0);
    EXPECT_TRUE(h.empty());
}

TEST(Issue37, FreeSpaceChecked) {
    const std::string d = temp_dir("space");
    EXPECT_NO_THROW(vit::hub::check_free_space(d, 1, "hf:a/b: model.safetensors"));
    const std::string e = error_of([&] { vit::hub::check_free_space(d, vit::hub::kMaxDownloadBytes * 1000, "hf:a/b: model.safetensors"); });
    EXPECT_NE(e.find("hf:a/b: model.safetensors needs"), std::string::npos) << e;
    EXPECT_NE(e.find(d), std::string::npos) << e;
}

// refs/a -> ., refs/b -> ., refs/x -> /, a snapshot that is a link to /: listed in bounded time,
// nothing reached through a link; the limits stop a scan and say so; progress can cancel it.
TEST(Issue37, CacheScanFollowsNoDirectoryLink) {
    const std::string d = temp_dir("scan"), st = d + "/models--o--n";
    ASSERT_EQ(::mkdir(st.c_str(), 0755), 0);
    for (const char* sub : {"/refs", "/snapshots", "/snapshots/c0ffee", "/blobs", "/refs/pr"})
        ASSERT_EQ(::mkdir((st + sub).c_str(), 0755), 0);
    put(st + "/refs/main", "c0ffee");
    put(st + "/refs/pr/1", "c0ffee");
    ASSERT_EQ(::symlink(".", (st + "/refs/a").c_str()), 0);
    ASSERT_EQ(::symlink(".", (st + "/refs/b").c_str()), 0);
    ASSERT_EQ(::symlink("/", (st + "/refs/x").c_str()), 0);
    ASSERT_EQ(::symlink("..", (st + "/refs/pr/up").c_str()), 0);
    ASSERT_EQ(::symlink("/", (st + "/snapshots/0000").c_str()), 0);
    put(st + "/blobs/w", slurp(std::string(VITSCOPE_SOURCE_DIR) + "/assets/fmnist_vit.safetensors"));
    ASSERT_EQ(::symlink("../../blobs/w", (st + "/snapshots/c0ffee/model.safetensors").c_str()), 0);
    const std::string none = temp_dir("torch");
    size_t calls = 0;
    const vit::hub::ScanResult r = vit::hub::scan_models(d, none, {}, [&](const vit::hub::ScanProgress& p) {
        ++calls;
        EXPECT_LE(p.done, p.total);
        return true;
    });
    ASSERT_EQ(r.found.size(), 1u);
    EXPECT_EQ(r.found[0].spec, "hf:o/n");
    EXPECT_TRUE(r.stopped.empty()) << r.stopped;
    EXPECT_EQ(calls, 1u);
    // a bound on the names read stops the scan and says so
    vit::hub::ScanLimits few;
    few.max_entries = 3;
    EXPECT_NE(vit::hub::scan_models(d, none, few).stopped.find("names"), std::string::npos);
    few = {};
    few.max_per_folder = 1;
    EXPECT_NE(vit::hub::scan_models(d, none, few).stopped.find("more than 1 names"), std::string::npos);
    // cancelled from the progress callback
    const vit::hub::ScanResult c = vit::hub::scan_models(d, none, {}, [](const vit::hub::ScanProgress&) { return false; });
    EXPECT_EQ(c.stopped, "cancelled");
    EXPECT_TRUE(c.found.empty());
}

// Outputs: links written through (or refused when dangling), devices and FIFOs in place, modes kept;
// write_file_replacing (the cache's own files) never writes through a link.
TEST(Issue37, OutputsNeverClobber) {
    const std::string d = temp_dir("out");
    put(d + "/private", "old");
    ASSERT_EQ(::chmod((d + "/private").c_str(), 0600), 0);
    vit::write_file_atomic(d + "/private", "new");
    struct stat sb;
    ASSERT_EQ(::stat((d + "/private").c_str(), &sb), 0);
    EXPECT_EQ(sb.st_mode & 07777, 0600u);
    EXPECT_EQ(slurp(d + "/private"), "new");

    put(d + "/target", "old");
    ASSERT_EQ(::symlink("target", (d + "/link").c_str()), 0);
    vit::write_file_atomic(d + "/link", "through");
    ASSERT_EQ(::lstat((d + "/link").c_str(), &sb), 0);
    EXPECT_TRUE(S_ISLNK(sb.st_mode));
    EXPECT_EQ(slurp(d + "/target"), "through");
    vit::write_npz(d + "/link", {}, {{"t", "x"}});
    ASSERT_EQ(::lstat((d + "/link").c_str(), &sb), 0);
    EXPECT_TRUE(S_ISLNK(sb.st_mode));
    EXPECT_EQ(slurp(d + "/target").substr(0, 2), "PK");

    ASSERT_EQ(::symlink("missing/x", (d + "/dangling").c_str()), 0);
    EXPECT_NE(error_of([&] { vit::write_file_atomic(d + "/dangling", "x"); }).find("does not exist"), std::string::npos);
    EXPECT_NE(error_of([&] { vit::write_file_atomic(d, "x"); }).find("is a directory"), std::string::npos);
    EXPECT_NE(error_of([&] { vit::write_file_atomic("", "x"); }).find("empty"), std::string::npos);

    ASSERT_EQ(::symlink("/dev/null", (d + "/null").c_str()), 0);
    vit::write_file_atomic(d + "/null", "gone");
    vit::write_npz(d + "/null", {}, {{"t", "x"}});
    ASSERT_EQ(::stat("/dev/null", &sb), 0);
    EXPECT_TRUE(S_ISCHR(sb.st_mode));
    ASSERT_EQ(::lstat((d + "/null").c_str(), &sb), 0);
    EXPECT_TRUE(S_ISLNK(sb.st_mode));

    const std::string fifo = d + "/fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
    EXPECT_NE(error_of([&] { vit::write_file_atomic(fifo, "x"); }).find("nobody reads"), std::string::npos);
    std::string got;
    std::thread reader([&] { got = slurp(fifo); });
    // the reader opens the FIFO in its own time: try until it has
    std::string e = "nobody reads";
    for (int i = 0; i < 200 && e.find("nobody reads") != std::string::npos; ++i) {
        e = error_of([&] { vit::write_file_atomic(fifo, "through the pipe"); });
        if (!e.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    reader.join();
    EXPECT_EQ(e, "");
    EXPECT_EQ(got, "through the pipe");
    ASSERT_EQ(::lstat(fifo.c_str(), &sb), 0);
    EXPECT_TRUE(S_ISFIFO(sb.st_mode));

    put(d + "/victim", "keep me");
    ASSERT_EQ(::symlink("victim", (d + "/ref").c_str()), 0);
    vit::write_file_replacing(d + "/ref", "c0ffee");
    EXPECT_EQ(slurp(d + "/victim"), "keep me");
    ASSERT_EQ(::lstat((d + "/ref").c_str(), &sb), 0);
    EXPECT_TRUE(S_ISREG(sb.st_mode));

    EXPECT_TRUE(vit::same_file(d + "/link", d + "/target"));
    EXPECT_FALSE(vit::same_file(d + "/victim", d + "/target"));
    EXPECT_FALSE(vit::same_file(d + "/nothing", d + "/nothing"));
}

// ------------------------------------------------------------------ fault 11: large 16-bit PNGs
// The big-PNG path (rows decoded in strips, shrunk on a second thread, 16-bit samples read
// big-endian without libpng's swap, no Adler-32) against the pixels the file was written from.
#include <zlib.h>

#include "core/io/image.h"

namespace {
void be32(std::string& o, uint32_t v) {
    for (int i = 3; i >= 0; --i) o += char((v >> (8 * i)) & 255);
}
void png_chunk(std::string& o, const char* type, const std::string& d) {
    be32(o, uint32_t(d.size()));
    std::string td = std::string(type, 4) + d;
    o += td;
    be32(o, uint32_t(crc32(0, reinterpret_cast<const Bytef*>(td.data()), uInt(td.size()))));
}
// A 16-bit RGB PNG (filter 0 rows) of value(x, y, c).
template <class F>
std::string png16(int w, int h, F value) {
    std::string raw;
    raw.reserve(size_t(h) * (1 + size_t(w) * 6));
    for (int y = 0; y < h; ++y) {
        raw += char(0);
        for (int x = 0; x < w; ++x)
            for (int c = 0; c < 3; ++c) {
                const uint16_t v = value(x, y, c);
                raw += char(v >> 8);
                raw += char(v & 255);
            }
    }
    uLongf n = compressBound(uLong(raw.size()));
    std::string z(n, '\0');
    EXPECT_EQ(compress2(reinterpret_cast<Bytef*>(&z[0]), &n, reinterpret_cast<const Bytef*>(raw.data()), uLong(raw.size()), 1), Z_OK);
    z.resize(n);
    std::string ihdr;
    be32(ihdr, uint32_t(w));
    be32(ihdr, uint32_t(h));
    ihdr += std::string("\x10\x02\x00\x00\x00", 5);
    std::string o = "\x89PNG\r\n\x1a\n";
    png_chunk(o, "IHDR", ihdr);
    png_chunk(o, "IDAT", z);
    png_chunk(o, "IEND", "");
    return o;
}
uint16_t v16(int x, int y, int c) { return uint16_t((x * 2654435761u + y * 40503u + c * 9973u) >> 7); }
}  // namespace

TEST(Issue37, LargeSixteenBitPngDecodedInStripsExactly) {
    const int W = 2560, H = 1700;  // over 4 M pixels: the strip path
    const std::string bytes = png16(W, H, v16);
    const vit::Image im = vit::decode_image(bytes, "big16.png");
    ASSERT_EQ(im.width, W);
    ASSERT_EQ(im.height, H);
    ASSERT_EQ(im.channels, 3);
    EXPECT_TRUE(im.sixteen_bit);
    size_t bad = 0;
    for (int c = 0; c < 3; ++c)
        for (int y = 0; y < H; y += 7)
            for (int x = 0; x < W; ++x) bad += im.pixels(c, y, x) != float(v16(x, y, c)) / 65535.f;
    EXPECT_EQ(bad, 0u);
    // Shrunk 2 x 2 (over a 1.1 M pixel budget): each pixel the exact mean of its block.
    const vit::Image s = vit::decode_image(bytes, "big16.png", 1100000);
    ASSERT_EQ(s.width, W / 2);
    ASSERT_EQ(s.height, H / 2);
    bad = 0;
    for (int c = 0; c < 3; ++c)
        for (int y = 0; y < H / 2; y += 5)
            for (int x = 0; x < W / 2; ++x) {
                const double sum = double(v16(2 * x, 2 * y, c)) + v16(2 * x + 1, 2 * y, c) + v16(2 * x, 2 * y + 1, c) +
                                   v16(2 * x + 1, 2 * y + 1, c);
                bad += s.pixels(c, y, x) != float(sum / (4.0 * 65535.f));
            }
    EXPECT_EQ(bad, 0u);
    // A truncated file is still named, with the strips' worker stopped.
    const std::string cut = bytes.substr(0, bytes.size() / 2);
    EXPECT_NE(error_of([&] { vit::decode_image(cut, "big16.png"); }).find("big16.png: corrupt or truncated PNG"), std::string::npos);
}

// Large PNGs are inflated and unfiltered by ViTScope itself (core/io/image.cpp png_idat_rows), not by
// libpng: every filter type (None, Sub, Up, Average, Paeth, one per row in turn) and every pixel size
// the path takes (8-bit gray, 8-bit RGBA, 16-bit gray + alpha, 16-bit RGB), over 4 M pixels, against the
// samples the file was written from; the same file under 4 M pixels through libpng, which checks the
// test's own filtering. Then what a broken stream is called.
namespace {
// A PNG of `channels` samples of `depth` bits, value(x, y, c), row y filtered with filter y % 5.
template <class F>
std::string png_filtered(int w, int h, int channels, int depth, F value, int level = 1) {
    const int bpp = channels * depth / 8;
    const size_t rb = size_t(w) * size_t(bpp);
    std::string raw;
    raw.reserve(size_t(h) * (rb + 1));
    std::vector<int> prev(rb, 0), cur(rb);
    for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x)
            for (int c = 0; c < channels; ++c) {
                const uint32_t v = value(x, y, c);
                if (depth == 16) {
                    cur[size_t(x * bpp + 2 * c)] = int(v >> 8) & 255;
                    cur[size_t(x * bpp + 2 * c + 1)] = int(v) & 255;
                } else {
                    cur[size_t(x * bpp + c)] = int(v) & 255;
                }
            }
        const int f = y % 5;
        raw += char(f);
        for (size_t i = 0; i < rb; ++i) {
            const int a = i >= size_t(bpp) ? cur[i - size_t(bpp)] : 0, b = prev[i], c = i >= size_t(bpp) ? prev[i - size_t(bpp)] : 0;
            int pred = 0;
            if (f == 1) pred = a;
            else if (f == 2) pred = b;
            else if (f == 3) pred = (a + b) >> 1;
            else if (f == 4) {
                const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
                pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
            }
            raw += char((cur[i] - pred) & 255);
        }
        std::swap(prev, cur);
    }
    uLongf n = compressBound(uLong(raw.size()));
    std::string z(n, '\0');
    EXPECT_EQ(compress2(reinterpret_cast<Bytef*>(&z[0]), &n, reinterpret_cast<const Bytef*>(raw.data()), uLong(raw.size()), level), Z_OK);
    z.resize(n);
    std::string ihdr;
    be32(ihdr, uint32_t(w));
    be32(ihdr, uint32_t(h));
    const int colour = channels == 1 ? 0 : channels == 2 ? 4 : channels == 3 ? 2 : 6;
    ihdr += char(depth);
    ihdr += char(colour);
    ihdr += std::string("\0\0\0", 3);
    std::string o = "\x89PNG\r\n\x1a\n";
    png_chunk(o, "IHDR", ihdr);
    // the image data in two IDAT chunks, as encoders split it
    png_chunk(o, "IDAT", z.substr(0, z.size() / 3));
    png_chunk(o, "IDAT", z.substr(z.size() / 3));
    png_chunk(o, "IEND", "");
    return o;
}
// Values with every kind of neighbour (Paeth's three choices and its ties): a hash, and flat runs.
uint32_t mixed(int x, int y, int c, int depth) {
    const uint32_t hsh = (uint32_t(x) * 2654435761u) ^ (uint32_t(y) * 40503u + uint32_t(c) * 9973u);
    const uint32_t v = (x / 7 + y / 5) % 3 == 0 ? uint32_t(x * 3 + y * 5 + c * 11) : hsh >> 9;
    return depth == 16 ? v & 0xFFFF : v & 0xFF;
}
}  // namespace

TEST(Issue37, LargePngEveryFilterDecodedExactly) {
    struct Case { int w, h, channels, depth; };
    for (const Case k : {Case{2048, 2048, 1, 8}, Case{2048, 2048, 4, 8}, Case{2048, 2048, 2, 16}, Case{2100, 2000, 3, 16}}) {
        for (const bool large : {true, false}) {
            const int w = large ? k.w : 300, h = large ? k.h : 203;
            const std::string bytes = png_filtered(w, h, k.channels, k.depth, [&](int x, int y, int c) { return mixed(x, y, c, k.depth); });
            const vit::Image im = vit::decode_image(bytes, "f.png");
            const std::string what = std::to_string(k.channels) + " channels of " + std::to_string(k.depth) + " bits, " +
                                     std::to_string(w) + "x" + std::to_string(h);
            ASSERT_EQ(im.width, w) << what;
            ASSERT_EQ(im.height, h) << what;
            const int keep = k.channels <= 2 ? 1 : 3;
            ASSERT_EQ(im.channels, keep) << what;
            const float scale = k.depth == 16 ? 65535.f : 255.f;
            size_t bad = 0;
            for (int c = 0; c < keep; ++c)
                for (int y = 0; y < h; ++y)
                    for (int x = 0; x < w; ++x) bad += im.pixels(c, y, x) != float(mixed(x, y, c, k.depth)) / scale;
            EXPECT_EQ(bad, 0u) << what;
            if (!large) continue;
            // shrunk 2 x 2 on the way (alpha dropped as it is summed): each pixel the exact mean of its block
            const vit::Image s = vit::decode_image(bytes, "f.png", 1100000);
            ASSERT_EQ(s.width, (w + 1) / 2) << what;
            ASSERT_EQ(s.height, (h + 1) / 2) << what;
            bad = 0;
            for (int c = 0; c < keep; ++c)
                for (int y = 0; y < s.height; ++y)
                    for (int x = 0; x < s.width; ++x) {
                        double sum = 0;
                        int cnt = 0;
                        for (int yy = 2 * y; yy < std::min(h, 2 * y + 2); ++yy)
                            for (int xx = 2 * x; xx < std::min(w, 2 * x + 2); ++xx) sum += mixed(xx, yy, c, k.depth), ++cnt;
                        bad += s.pixels(c, y, x) != float(sum / (double(cnt) * scale));
                    }
            EXPECT_EQ(bad, 0u) << what << ", shrunk 2x2";
        }
    }
}

TEST(Issue37, LargePngBrokenStreamNamed) {
    const std::string good = png_filtered(2048, 2048, 1, 8, [](int x, int y, int) { return uint32_t(x + y); });
    auto err = [](const std::string& b) { return error_of([&] { vit::decode_image(b, "g.png"); }); };
    EXPECT_EQ(err(good), "");
    // a flipped byte in the compressed data: the IDAT's CRC
    std::string crc = good;
    crc[crc.size() / 2] ^= 0x40;
    EXPECT_NE(err(crc).find("g.png: corrupt or truncated PNG (IDAT: CRC error)"), std::string::npos) << err(crc);
    // cut in the middle, or before IEND
    EXPECT_NE(err(good.substr(0, good.size() / 2)).find("g.png: corrupt or truncated PNG (the file ends early"), std::string::npos);
    EXPECT_NE(err(good.substr(0, good.size() - 12)).find("g.png: corrupt or truncated PNG"), std::string::npos);
    // rows filtered with type 5 (none such): the data rebuilt with a bad filter byte
    std::string raw(size_t(2048) * 2049, '\0');
    raw[size_t(2049) * 7] = 5;
    uLongf n = compressBound(uLong(raw.size()));
    std::string z(n, '\0');
    ASSERT_EQ(compress2(reinterpret_cast<Bytef*>(&z[0]), &n, reinterpret_cast<const Bytef*>(raw.data()), uLong(raw.size()), 1), Z_OK);
    z.resize(n);
    std::string ihdr;
    be32(ihdr, 2048);
    be32(ihdr, 2048);
    ihdr += std::string("\x08\x00\x00\x00\x00", 5);
    auto file = [&](const std::string& data) {
        std::string o = "\x89PNG\r\n\x1a\n";
        png_chunk(o, "IHDR", ihdr);
        png_chunk(o, "IDAT", data);
        png_chunk(o, "IEND", "");
        return o;
    };
    EXPECT_NE(err(file(z)).find("bad adaptive filter value"), std::string::npos) << err(file(z));
    // too few rows, and more data than the image holds
    auto deflated = [](const std::string& r) {
        uLongf m = compressBound(uLong(r.size()));
        std::string d(m, '\0');
        compress2(reinterpret_cast<Bytef*>(&d[0]), &m, reinterpret_cast<const Bytef*>(r.data()), uLong(r.size()), 1);
        d.resize(m);
        return d;
    };
    EXPECT_NE(err(file(deflated(std::string(size_t(2048) * 2049 - 100, '\0')))).find("not enough image data"), std::string::npos);
    EXPECT_NE(err(file(deflated(std::string(size_t(2048) * 2049 + 100, '\0')))).find("too much image data"), std::string::npos);
}
