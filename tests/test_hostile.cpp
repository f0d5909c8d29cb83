// Issue 23, "hostile inputs, round three": the budgets and reports of the core
// readers, each against numbers worked out by hand here (the end-to-end cases,
// with the CLI under a memory limit, are in test_hostile.py).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/io/checkpoint.h"
#include "core/io/dataset.h"
#include "core/io/image.h"
#include "core/io/io.h"
#include "core/io/pth.h"
#include "core/model/finite.h"
#include "core/model/forward.h"
#include "fuzz/stored_zip.h"

#include <xtensor/xbuilder.hpp>

using namespace vit;

namespace {
std::string what_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}
// An empty directory of its own under the system's temporary directory (this process's id in its name).
std::filesystem::path fresh_temp_dir(const std::string& name) {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}
// data.pkl behind a valid zip with one float storage of 16 values.
std::string pth_with(const std::string& pkl) {
    return fuzz::stored_zip({{"archive/data.pkl", pkl}, {"archive/data/0", std::string(64, '\0')}, {"archive/version", "3\n"}});
}
std::map<std::string, Array> timm_tensors(const Weights& w) {
    std::map<std::string, Array> m;
    for_each_param([&](const std::string& n, const auto& t) { m.emplace(n, Array(t)); }, w);
    const Config& c = w.cfg;
    m["patch_embed.proj.weight"].reshape({size_t(c.width), size_t(c.channels), size_t(c.patch), size_t(c.patch)});
    return m;
}
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
}  // namespace

// The memo bomb (one value, then MEMOIZE after MEMOIZE), a MARK-only pickle, BINGET onto the
// stack: each stops at the first 1,000,000 with the file, data.pkl and the structure named.
TEST(HostilePickle, MemoMarksAndStackAreBounded) {
    struct Case { std::string pkl, words; };
    const Case cases[] = {
        {"\x80\x02N" + std::string(1'200'000, '\x94') + ".", "memo entries"},
        {"\x80\x02" + std::string(1'200'000, '(') + "N.", "open MARKs"},
        {"\x80\x02N\x94" + [] { std::string s; for (int i = 0; i < 1'200'000; ++i) s += std::string("h\0", 2); return s; }() + ".", "stack"},
    };
    for (auto& c : cases) {
        SCOPED_TRACE(c.words);
        std::string m = what_of([&] { parse_pth(pth_with(c.pkl), "bomb.pth"); });
        EXPECT_NE(m.find("bomb.pth: archive/data.pkl: "), std::string::npos) << m;
        EXPECT_NE(m.find(c.words), std::string::npos) << m;
        EXPECT_NE(m.find("1000000"), std::string::npos) << m;
    }
    // Below the caps the same shapes are fine (a pickle of one None is not a state dict).
    std::string m = what_of([&] { parse_pth(pth_with("\x80\x02N" + std::string(1000, '\x94') + "."), "small.pth"); });
    EXPECT_NE(m.find("holds a None, not a state dict"), std::string::npos) << m;
}

// What no count cap catches, the byte budget does: one memoized 64-dimensional view rebuilt
// 200,000 times (each rebuild keeps its own shape and strides, ~1 KB).
TEST(HostilePickle, ViewsRebuiltFromMemoizedArgumentsHitTheBudget) {
    using namespace std::string_literals;
    std::string size;
    for (int i = 0; i < 64; ++i) size += "K\x01"s;
    std::string p = "\x80\x02"s + "ctorch._utils\n_rebuild_tensor_v2\nq\x00"s +
                    // (storage "0": 16 floats, offset 0, size (1,)*64, stride (1,)*64, False, OrderedDict())
                    "((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x10tQ"s +
                    "K\x00("s + size + "t("s + size + "t\x89"s + "ccollections\nOrderedDict\n)R"s + "tq\x01"s + "("s;
    for (int i = 0; i < 200'000; ++i) p += "h\x00h\x01R"s;
    p += "l."s;
    std::string m = what_of([&] { parse_pth(pth_with(p), "views.pth"); });
    EXPECT_NE(m.find("views.pth: archive/data.pkl: "), std::string::npos) << m;
    EXPECT_NE(m.find("tensor views would take the unpickler past its 128 MB memory budget"), std::string::npos) << m;
}

// A TorchScript module tree may share a submodule (the memo makes it one object); one shared
// twice at each of 60 levels is 2^60 paths through a 1.4 KB data.pkl. The walk counts every
// attribute it visits and stops at 1,000,000 naming the file (it used to walk forever).
TEST(HostilePickle, SharedTorchScriptSubtreesAreWalkedBoundedly) {
    using namespace std::string_literals;
    auto X = [](const std::string& s) { return "X"s + char(s.size()) + "\0\0\0"s + s; };
    std::function<std::string(int)> obj = [&](int level) -> std::string {
        // NEWOBJ of the class (memo 0); above level 0, BUILD {"a": child (memo level), "b": the same child}
        if (level == 0) return "h\0)\x81"s;
        return "h\0)\x81}("s + X("a") + obj(level - 1) + "q"s + char(level) + X("b") + "h"s + char(level) + "ub"s;
    };
    std::string pkl = obj(60);
    pkl.replace(0, 2, "c__torch__\nM\nq\0"s);  // the first use of the class defines it
    const std::string zip = fuzz::stored_zip({{"archive/data.pkl", "\x80\x02"s + pkl + "."s},
                                              {"archive/constants.pkl", "\x80\x02)."s},
                                              {"archive/code/__torch__.py", ""},
                                              {"archive/version", "3\n"}});
    std::string m = what_of([&] { parse_pth(zip, "dag.pt"); });
    EXPECT_NE(m.find("dag.pt: the TorchScript module tree"), std::string::npos) << m;
    EXPECT_NE(m.find("1000000"), std::string::npos) << m;
    // Sharing itself is fine: 10 levels (1,023 objects walked) is a tree with no tensors.
    pkl = obj(10);
    pkl.replace(0, 2, "c__torch__\nM\nq\0"s);
    m = what_of([&] { parse_pth(fuzz::stored_zip({{"archive/data.pkl", "\x80\x02"s + pkl + "."s},
                                                  {"archive/constants.pkl", "\x80\x02)."s},
                                                  {"archive/code/__torch__.py", ""}}), "small.pt"); });
    EXPECT_NE(m.find("small.pt: a TorchScript archive whose module '__torch__.M' holds no tensors"), std::string::npos) << m;
}

// A config's resize must lie in image_size..2*image_size (the checkpoint with resize 8192 on 8x8).
TEST(HostileConfig, ResizeIsTiedToImageSize) {
    Config c = preset("toy-rgb8");
    auto load_with = [&](int resize) {
        Config k = c;
        k.pre.resize = resize;
        return what_of([&] {
            weights_from_tensors(timm_tensors(init_weights(c, 1)),
                                 {{"vitscope.config", config_to_json(k)}, {"num_heads", "2"}}, "resize.safetensors", {});
        });
    };
    for (int bad : {8192, 17, 7}) {
        std::string m = load_with(bad);
        EXPECT_NE(m.find("resize.safetensors"), std::string::npos) << m;
        EXPECT_NE(m.find("field 'resize' is " + std::to_string(bad)), std::string::npos) << m;
        EXPECT_NE(m.find("8..16"), std::string::npos) << m;
    }
    for (int good : {0, 8, 9, 16}) EXPECT_EQ(load_with(good), "") << good;
    for (auto& n : preset_names()) EXPECT_NO_THROW(preset(n).validate()) << n;
    for (auto& a : preset_aliases()) EXPECT_NO_THROW(preset(a.alias).validate()) << a.alias;
}

TEST(HostileNonFinite, CountsByHand) {
    const float v[] = {1.f, kNaN, -kInf, 2.f, kInf, kNaN, -0.f, std::numeric_limits<float>::denorm_min()};
    NonFinite nf = count_nonfinite(v, 8);
    EXPECT_EQ(nf.nan, 2u);
    EXPECT_EQ(nf.pos_inf, 1u);
    EXPECT_EQ(nf.neg_inf, 1u);
    EXPECT_EQ(nf.first, 1u);
    EXPECT_EQ(nf.describe(), "2 NaN, 1 +Inf, 1 -Inf of 8 values, first at flat index 1");
    EXPECT_FALSE(count_nonfinite(v, 1).any());
    EXPECT_EQ(count_nonfinite(v + 2, 6).first, 0u);
}

// NaN / Inf in a file's tensors are named at load by the file's own tensor names.
TEST(HostileNonFinite, NamedAtLoadByTheFilesNames) {
    Weights w = init_weights(preset("toy-rgb8"), 3);
    auto m = timm_tensors(w);
    m["blocks.0.attn.qkv.weight"](0, 0) = kNaN;
    m["blocks.0.attn.qkv.weight"](3, 1) = kInf;
    m["head.bias"](2) = -kInf;
    LoadedModel lm = weights_from_tensors(std::move(m), {{"num_heads", "2"}}, "nan.safetensors", {});
    ASSERT_EQ(lm.nonfinite.size(), 2u);
    EXPECT_EQ(lm.nonfinite[0].first, "blocks.0.attn.qkv.weight");
    EXPECT_EQ(lm.nonfinite[0].second.nan, 1u);
    EXPECT_EQ(lm.nonfinite[0].second.pos_inf, 1u);
    EXPECT_EQ(lm.nonfinite[1].first, "head.bias");
    const std::string warn = lm.nonfinite_warning();
    EXPECT_NE(warn.find("nan.safetensors: 2 tensors hold non-finite values: blocks.0.attn.qkv.weight (1 NaN, 1 +Inf of 108"),
              std::string::npos) << warn;
    EXPECT_TRUE(weights_from_tensors(timm_tensors(w), {{"num_heads", "2"}}, "ok", {}).nonfinite.empty());
}

// The first stage, in execution order, that holds NaN / Inf: a NaN in W_qkv first shows in
// attn.q (every LayerNorm before it is finite); a NaN in the input, in `input` itself.
TEST(HostileNonFinite, FirstStageOfAPass) {
    Weights w = init_weights(preset("toy-rgb8"), 3);
    Tensor3 x = xt::zeros<float>({3, 8, 8});
    EXPECT_FALSE(first_nonfinite_stage(run(w, x)).has_value());
    Weights bad = w;
    bad.blocks[0].qkv_w(0, 0) = kNaN;  // row 0 is q's first output feature
    Trace t = run(bad, x);
    auto nf = first_nonfinite_stage(t);
    ASSERT_TRUE(nf.has_value());
    EXPECT_EQ(nf->stage, "blocks.0.attn.q");
    EXPECT_EQ(t.name(nf->index), "blocks.0.attn.q");
    EXPECT_EQ(nf->counts.nan, size_t(w.cfg.tokens()));  // feature 0 of head 0, in every token
    EXPECT_NE(nf->describe(t.size()).find("first at stage 'blocks.0.attn.q'"), std::string::npos);
    Tensor3 xi = x;
    xi(1, 2, 3) = kInf;
    auto in = first_nonfinite_stage(run(w, xi));
    ASSERT_TRUE(in.has_value());
    EXPECT_EQ(in->stage, "input");
    EXPECT_EQ(in->counts.pos_inf, 1u);
    EXPECT_EQ(in->counts.first, size_t(1 * 64 + 2 * 8 + 3));
}

TEST(HostileInput, WrongShapeNamesTheFileAndBothShapes) {
    Config c = preset("toy-rgb8");
    std::string m = what_of([&] { input_from_array(xt::zeros<float>({3, 8, 9}), c, "in.npy"); });
    EXPECT_NE(m.find("in.npy: input has shape (3, 8, 9); this model (toy-rgb8) takes (3, 8, 8)"), std::string::npos) << m;
    m = what_of([&] { input_from_array(xt::zeros<float>({192}), c, "flat.npy"); });
    EXPECT_NE(m.find("flat.npy: input has shape (192,)"), std::string::npos) << m;
    EXPECT_EQ(shape_of(input_from_array(xt::zeros<float>({3, 8, 8}), c, "ok.npy")), (Shape{3, 8, 8}));
}

// Class names and other text from files on a terminal: every control character escaped.
TEST(HostileText, TerminalSafe) {
    EXPECT_EQ(terminal_safe("\x1b[2J\x1b[31mred"), "\\x1b[2J\\x1b[31mred");
    EXPECT_EQ(terminal_safe("a\x07" "b\rc\x7f"), "a\\x07b\\x0dc\\x7f");
    EXPECT_EQ(terminal_safe("C1 \xc2\x9b" "31m"), "C1 \\xc2\\x9b31m");           // U+009B, CSI
    EXPECT_EQ(terminal_safe("bad \xff\xc0\x80 end"), "bad \\xff\\xc0\\x80 end");  // invalid and overlong
    EXPECT_EQ(terminal_safe("Ankle boot \xc3\xa4 \xe7\x8c\xab"), "Ankle boot \xc3\xa4 \xe7\x8c\xab");  // UTF-8 kept
    EXPECT_EQ(terminal_safe("back\\slash"), "back\\\\slash");
    EXPECT_EQ(terminal_safe("two\nlines"), "two\\x0alines");
    EXPECT_EQ(terminal_safe("two\nlines", true), "two\nlines");
}

// A --labels file is the class names in class order, one a line. A UTF-8 byte-order mark (as
// Notepad writes) is not part of the first name; Windows line ends, trailing spaces and blank lines
// at the end are dropped; a blank line between names would shift every later class by one, so it
// is refused naming the file and the line, never skipped.
TEST(HostileText, LabelsAreOneNameALineInClassOrder) {
    Config c = preset("toy-rgb8");
    c.classes = 4;
    apply_labels(c, "\xef\xbb\xbf" "cat\r\ndog \r\nbird\r\nfish\r\n\r\n\n", "bom.txt");
    EXPECT_EQ(c.class_names, (std::vector<std::string>{"cat", "dog", "bird", "fish"}));
    std::string m = what_of([&] { apply_labels(c, "cat\ndog\n\nbird\nfish\n", "gap.txt"); });
    EXPECT_NE(m.find("gap.txt: line 3 is blank"), std::string::npos) << m;
    m = what_of([&] { apply_labels(c, "\ncat\ndog\nbird\nfish", "lead.txt"); });
    EXPECT_NE(m.find("lead.txt: line 1 is blank"), std::string::npos) << m;
    m = what_of([&] { apply_labels(c, "cat\ndog\nbird\n", "three.txt"); });
    EXPECT_NE(m.find("three.txt: 3 class names for a model with 4 classes"), std::string::npos) << m;
}

// A class name is at most 1 KB whatever its source, and a class-name file at most 8 MiB: a larger
// file is refused before it is read, a longer name naming the file, its line and the limit.
TEST(HostileText, ClassNamesHaveLimits) {
    namespace fs = std::filesystem;
    Config c = preset("toy-rgb8");
    c.classes = 3;
    apply_labels(c, "cat\n" + std::string(1024, 'd') + "\nbird\n", "edge.txt");
    EXPECT_EQ(c.class_names[1].size(), 1024u);
    std::string m = what_of([&] { apply_labels(c, "cat\ndog\n" + std::string(1025, 'b') + "\n", "long.txt"); });
    EXPECT_NE(m.find("long.txt: line 3 is a class name of 1025 bytes, more than the 1024 a class name may have"),
              std::string::npos) << m;
    m = what_of([&] { apply_labels(c, std::string(3 << 20, 'x'), "oneline.txt"); });
    EXPECT_NE(m.find("oneline.txt: line 1 is a class name of 3145728 bytes"), std::string::npos) << m;
    // a file one byte over 8 MiB (sparse: nothing is written, and nothing may be read)
    const fs::path big = fs::temp_directory_path() / ("vitscope_labels_" + std::to_string(::getpid()) + ".txt");
    std::ofstream(big.string()).close();
    fs::resize_file(big, (size_t(8) << 20) + 1);
    m = what_of([&] { apply_labels_file(c, big.string()); });
    EXPECT_NE(m.find(big.string() + ": 8388609 bytes, more than the 8388608 (8 MiB) a class-name file may hold"),
              std::string::npos) << m;
    fs::remove(big);
    // a checkpoint's own names (metadata, vitscope.config) go through the config's check
    Config k = preset("toy-rgb8");
    k.class_names.assign(size_t(k.classes), "n");
    k.class_names[2] = std::string(1025, 'n');
    m = what_of([&] { k.validate(); });
    EXPECT_NE(m.find("class name 2 is 1025 bytes, more than the 1024 a class name may have"), std::string::npos) << m;
}

// Paths that are not regular files are refused by every reader before it reads or waits: /dev/zero
// (endless), /dev/null (empty), a directory, a FIFO (an open would wait for a writer), each named
// with what it is.
TEST(HostileFiles, DevicesDirectoriesAndPipesAreNamed) {
    namespace fs = std::filesystem;
    const fs::path dir = fresh_temp_dir("vitscope_notfiles");
    const std::string fifo = (dir / "fifo").string();
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const std::vector<std::pair<std::string, std::string>> paths = {
        {"/dev/zero", "is a character device, not a regular file"},
        {"/dev/null", "is a character device, not a regular file"},
        {dir.string(), "is a directory, not a regular file"},
        {fifo, "is a FIFO (a pipe), not a regular file"}};
    for (const auto& entry : paths) {
        const std::string& p = entry.first;  // a reference the lambdas can capture (a structured binding is not, before C++20)
        const std::string& kind = entry.second;
        Config c = preset("toy-rgb8");
        const std::vector<std::pair<const char*, std::function<void()>>> readers = {
            {"read_file", [&] { read_file(p); }},
            {"load_image", [&] { load_image(p); }},
            {"read_npy", [&] { read_npy(p); }},
            {"read_checkpoint", [&] { read_checkpoint(p); }},
            {"index_checkpoint", [&] { index_checkpoint(p); }},
            {"read_safetensors", [&] { read_safetensors(p); }},
            {"load_model", [&] { load_model(p, {}, 0); }},
            {"apply_labels_file", [&] { apply_labels_file(c, p); }},
            {"load_idx", [&] { load_idx(p, p); }}};
        for (const auto& [name, read] : readers) {
            const std::string m = what_of(read);
            EXPECT_NE(m.find(p + ": " + kind), std::string::npos) << name << "(" << p << "): " << m;
        }
    }
    fs::remove_all(dir);
}

// IDX payloads are read once into a vector sized from the header (no second copy, no slack);
// a gzip of two members reads as one file, as gzread reads it.
TEST(HostileIdx, HeldOnceAndMultiMemberGzip) {
    auto be32 = [](uint32_t v) { std::string s; for (int k = 24; k >= 0; k -= 8) s.push_back(char(v >> k & 0xff)); return s; };
    std::string im = be32(0x803) + be32(3) + be32(4) + be32(5), lb = be32(0x801) + be32(3) + "\x01\x02\x03";
    for (int i = 0; i < 60; ++i) im.push_back(char(i));
    auto gz = [](const std::string& s) {
        z_stream z{};
        deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
        std::string out(s.size() + 128, '\0');
        z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.data()));
        z.avail_in = uInt(s.size());
        z.next_out = reinterpret_cast<Bytef*>(&out[0]);
        z.avail_out = uInt(out.size());
        deflate(&z, Z_FINISH);
        out.resize(out.size() - z.avail_out);
        deflateEnd(&z);
        return out;
    };
    Dataset d = parse_idx(gz(im.substr(0, 30)) + gz(im.substr(30)), lb, "im.gz", "lb");
    EXPECT_EQ(d.n, 3);
    EXPECT_EQ(d.images.size(), 60u);
    EXPECT_EQ(d.images.capacity(), 60u);
    EXPECT_EQ(d.images[59], 59);
    EXPECT_EQ(d.labels[2], 3);
    std::string m = what_of([&] { parse_idx(gz(im + "x"), lb, "long.gz", "lb"); });
    EXPECT_NE(m.find("long.gz: more data than its header says"), std::string::npos) << m;
    m = what_of([&] { parse_idx(gz(im).substr(0, 20), lb, "cut.gz", "lb"); });
    EXPECT_NE(m.find("cut.gz"), std::string::npos) << m;
    m = what_of([&] { parse_idx(im, be32(0x801) + be32(4) + "\x01\x02\x03\x04", "im", "four"); });
    EXPECT_NE(m.find("im has 3 images but four has 4 labels"), std::string::npos) << m;
}

// Fashion-MNIST has 10 classes: a label file holding another value is refused naming the file,
// the label and the image (training said "training label 200 (image 31)" and named no file;
// `eval` counted such an image as a miss and left it out of the confusion matrix). A --data that
// is missing or a file is named as such, not as a missing IDX file inside it.
TEST(HostileIdx, FashionMnistLabelsAndDirectoryNamed) {
    namespace fs = std::filesystem;
    const fs::path dir = fresh_temp_dir("vitscope_fmnist");
    auto be32 = [](uint32_t v) { std::string s; for (int k = 24; k >= 0; k -= 8) s.push_back(char(v >> k & 0xff)); return s; };
    std::ofstream(dir / "t10k-images-idx3-ubyte", std::ios::binary) << be32(0x803) + be32(3) + be32(2) + be32(2) + std::string(12, '\0');
    std::ofstream(dir / "t10k-labels-idx1-ubyte", std::ios::binary) << be32(0x801) + be32(3) + std::string("\x09\x00\x0a", 3);
    const std::string labels = (dir / "t10k-labels-idx1-ubyte").string();
    std::string m = what_of([&] { load_fashion_mnist(dir.string(), false); });
    EXPECT_NE(m.find(labels + ": label 10 of image 2 is not one of Fashion-MNIST's 10 classes (0..9)"), std::string::npos) << m;
    std::ofstream(dir / "t10k-labels-idx1-ubyte", std::ios::binary) << be32(0x801) + be32(3) + std::string("\x09\x00\x01", 3);
    EXPECT_EQ(load_fashion_mnist(dir.string(), false).labels[0], 9);
    m = what_of([&] { load_fashion_mnist(labels, false); });
    EXPECT_NE(m.find(labels + ": not a directory"), std::string::npos) << m;
    m = what_of([&] { load_fashion_mnist((dir / "nope").string(), false); });
    EXPECT_NE(m.find((dir / "nope").string() + ": no such directory"), std::string::npos) << m;
    fs::remove_all(dir);
}
