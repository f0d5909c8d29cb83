// The Hugging Face cache, read and filled as huggingface_hub's file_download.py does it, over libcurl.
#include "core/io/hub.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "core/io/hub_internal.h"
#include "core/io/io.h"

namespace vit::hub {

namespace {

std::string env(const char* k) {
    const char* v = std::getenv(k);
    return v ? v : "";
}

std::string home_dir() {
    std::string h = env("HOME");
    if (!h.empty()) return h;
    if (const passwd* pw = ::getpwuid(::getuid())) return pw->pw_dir ? pw->pw_dir : "";
    return "";
}

std::string expand_user(const std::string& p) {
    if (p == "~" || p.rfind("~/", 0) == 0) return home_dir() + p.substr(1);
    return p;
}

std::string xdg_cache() {
    std::string x = env("XDG_CACHE_HOME");
    return x.empty() ? home_dir() + "/.cache" : expand_user(x);
}

bool is_true(const std::string& v) {
    std::string u;
    for (char c : v) u += char(std::toupper(static_cast<unsigned char>(c)));
    return u == "1" || u == "ON" || u == "YES" || u == "TRUE";
}

using detail::safe_component;
using detail::strip;
using detail::word_char;

bool is_commit(const std::string& r) {
    if (r.size() != 40) return false;
    for (char c : r)
        if (!std::isdigit(static_cast<unsigned char>(c)) && !(c >= 'a' && c <= 'f')) return false;
    return true;
}

// Percent-encoding as Python's urllib.parse.quote(s, safe=...).
std::string quote(const std::string& s, const char* safe) {
    static const char* hex = "0123456789ABCDEF";
    std::string o;
    for (unsigned char c : s) {
        const bool keep = std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || (c && std::strchr(safe, c));
        if (keep) o += char(c);
        else { o += '%'; o += hex[c >> 4]; o += hex[c & 15]; }
    }
    return o;
}

// "scheme://host[:port]" of a URL, lower-cased: where an Authorization header may go.
std::string origin(const std::string& url) {
    size_t p = url.find("://");
    if (p == std::string::npos) return "";
    size_t e = url.find_first_of("/?#", p + 3);
    std::string o = url.substr(0, e);
    for (char& c : o) c = char(std::tolower(static_cast<unsigned char>(c)));
    return o;
}

// A URL for a message: without its query (a CDN's signed URLs carry credentials there).
std::string printable(const std::string& url) { return url.substr(0, url.find('?')).substr(0, 300); }

bool is_file(const std::string& p) {
    struct stat sb;
    return ::stat(p.c_str(), &sb) == 0 && S_ISREG(sb.st_mode);  // follows the snapshot's symlink to its blob
}

bool exists(const std::string& p) {
    struct stat sb;
    return ::lstat(p.c_str(), &sb) == 0;
}

void make_dirs(const std::string& dir) {
    std::string cur;
    size_t i = 0;
    while (i <= dir.size()) {
        size_t j = dir.find('/', i);
        if (j == std::string::npos) j = dir.size();
        cur = dir.substr(0, j);
        if (!cur.empty() && ::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
            throw FileError(cur + ": cannot create the folder: " + std::strerror(errno));
        i = j + 1;
    }
    struct stat sb;
    if (::stat(dir.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) throw FileError(dir + ": not a folder");
}

std::string parent_of(const std::string& p) {
    size_t s = p.rfind('/');
    return s == std::string::npos ? "." : p.substr(0, s);
}

// ------------------------------------------------------------------ HTTP over libcurl

void curl_init_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw FileError("libcurl could not be initialised");
    });
}

struct Reply {
    CURLcode code = CURLE_OK;
    std::string curl_error;          // libcurl's message when code != CURLE_OK
    long status = 0;
    std::map<std::string, std::string> headers;  // of the last response, names lower-cased
    std::string url;                 // the URL this reply answers
    std::string header(const std::string& k) const {
        auto it = headers.find(k);
        return it == headers.end() ? "" : it->second;
    }
};

size_t on_header(char* buf, size_t size, size_t n, void* ud) {
    Reply* r = static_cast<Reply*>(ud);
    parse_header_line(std::string(buf, size * n), r->status, r->headers);
    return size * n;
}

using Easy = std::unique_ptr<CURL, void (*)(CURL*)>;
using Headers = std::unique_ptr<curl_slist, void (*)(curl_slist*)>;

struct Ctx {
    Ref ref;
    std::string spec, cache, storage, endpoint;
    std::string token, token_from;   // token_from names where the token came from (never the token)
    ProgressFn progress;
};

Easy make_easy(const Ctx& cx, const std::string& url, Reply& r, Headers& hl, char* errbuf) {
    curl_init_once();
    Easy e(curl_easy_init(), curl_easy_cleanup);
    if (!e) throw FileError(cx.spec + ": libcurl could not start a transfer");
    CURL* c = e.get();
    curl_slist* l = curl_slist_append(nullptr, "Accept-Encoding: identity");  // sizes as stored, never compressed
    // The token goes to the hub's own host only, never to a CDN elsewhere (the hub signs those URLs).
    if (!cx.token.empty() && origin(url) == origin(cx.endpoint))
        l = curl_slist_append(l, ("Authorization: Bearer " + cx.token).c_str());
    hl.reset(l);
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, l);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "vitscope (huggingface_hub cache layout)");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    // A transfer slower than 1 KiB/s over the stall window fails (a drip of 2 B/s never ended).
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, kMinBytesPerSecond);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, stall_seconds());
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    r.url = url;
    return e;
}

void finish(Reply& r, CURLcode code, const char* errbuf) {
    r.code = code;
    if (code != CURLE_OK) r.curl_error = errbuf[0] ? errbuf : curl_easy_strerror(code);
}

// HEAD, following only relative redirects (a renamed repository); an absolute one (the hub's
// redirect of a large file to its CDN) is returned as is: its Location is where the bytes are.
Reply head(const Ctx& cx, std::string url) {
    for (int hop = 0;; ++hop) {
        Reply r;
        Headers hl(nullptr, curl_slist_free_all);
        char errbuf[CURL_ERROR_SIZE] = {};
        Easy e = make_easy(cx, url, r, hl, errbuf);
        curl_easy_setopt(e.get(), CURLOPT_NOBODY, 1L);
        curl_easy_setopt(e.get(), CURLOPT_TIMEOUT, 60L);
        finish(r, curl_easy_perform(e.get()), errbuf);
        std::string loc = r.header("location");
        if (r.code == CURLE_OK && r.status >= 300 && r.status < 400 && loc.size() > 1 && loc[0] == '/' && loc[1] != '/' &&
            hop < 5) {
            url = origin(url) + loc;
            continue;
        }
        return r;
    }
}

// ------------------------------------------------------------------ messages

std::string server_says(const Reply& r) {
    std::string m = r.header("x-error-message");
    return m.empty() ? "" : " (the server says: " + m.substr(0, 300) + ")";
}

std::string login_advice(const Ctx& cx) {
    return "Log in with 'huggingface-cli login' or set HF_TOKEN to an access token that can read " + cx.ref.repo_id +
           " (a gated model's terms must first be accepted at " + cx.endpoint + "/" + cx.ref.repo_id + ")";
}

[[noreturn]] void http_error(const Ctx& cx, const std::string& file, const Reply& r) {
    const std::string code = r.header("x-error-code"), head = cx.spec + ": " + file + ": HTTP " + std::to_string(r.status);
    if (code == "RevisionNotFound")
        throw FileError(cx.spec + ": revision '" + cx.ref.revision + "' not found in " + cx.ref.repo_id + " on " +
                        cx.endpoint + " (HTTP " + std::to_string(r.status) + ")" + server_says(r));
    if (code == "RepoNotFound")
        throw FileError(cx.spec + ": repository " + cx.ref.repo_id + " not found on " + cx.endpoint + " (HTTP " +
                        std::to_string(r.status) + ")" + server_says(r) + ". Check the name; a private one needs a token: " +
                        login_advice(cx) + ".");
    if (code == "GatedRepo" || r.status == 403) {
        std::string who = cx.token.empty() ? "without a token" : "with the token from " + cx.token_from;
        throw FileError(head + " from " + cx.endpoint + ": " + cx.ref.repo_id + " is gated or private and cannot be read " +
                        who + server_says(r) + ". " +
                        (cx.token.empty() ? login_advice(cx)
                                          : "Accept its terms at " + cx.endpoint + "/" + cx.ref.repo_id +
                                                " with the account of that token, or set HF_TOKEN to a token that has access") +
                        ".");
    }
    if (r.status == 401) {
        if (cx.token.empty())
            throw FileError(head + " Unauthorized from " + cx.endpoint + ": " + cx.ref.repo_id +
                            " does not exist, or is private or gated, and no token was sent" + server_says(r) + ". " +
                            login_advice(cx) + ".");
        throw FileError(head + " Unauthorized from " + cx.endpoint + ": the token from " + cx.token_from +
                        " was not accepted for " + cx.ref.repo_id + " (invalid or expired, or without access to it)" +
                        server_says(r) + ". Set HF_TOKEN to a valid token or log in again with 'huggingface-cli login'.");
    }
    if (r.status == 404)
        throw FileError(cx.spec + ": " + cx.ref.repo_id + " has no file " + file + " at revision " + cx.ref.revision +
                        " on " + cx.endpoint + " (HTTP 404 for " + printable(r.url) + ")" + server_says(r));
    throw FileError(head + " from " + printable(r.url) + server_says(r));
}

// A reply that is not HTTP as libcurl reads it ("Nul byte in header", a status line it cannot
// parse), or a redirect it refuses: the server answered, so it is not the network.
bool malformed_reply(CURLcode c) {
    return c == CURLE_WEIRD_SERVER_REPLY || c == CURLE_UNSUPPORTED_PROTOCOL || c == CURLE_BAD_CONTENT_ENCODING ||
           c == CURLE_HTTP2 || c == CURLE_HTTP2_STREAM || c == CURLE_TOO_MANY_REDIRECTS || c == CURLE_RANGE_ERROR ||
           c == CURLE_FILESIZE_EXCEEDED;
}

[[noreturn]] void malformed(const Ctx& cx, const std::string& file, const Reply& r) {
    throw FileError(cx.spec + ": " + file + ": the server at " + origin(r.url.empty() ? cx.endpoint : r.url) +
                    " sent a reply that is not valid HTTP (" + terminal_safe(r.curl_error) +
                    "); is HF_ENDPOINT a Hugging Face hub (or a mirror of one)?");
}

[[noreturn]] void no_network(const Ctx& cx, const std::string& file, const Reply& r) {
    // Connected, then too slow to answer: not a missing network (a connect or resolve timeout is).
    if (r.code == CURLE_OPERATION_TIMEDOUT && r.curl_error.find("Connection timed out") == std::string::npos &&
        r.curl_error.find("Resolving timed out") == std::string::npos && r.curl_error.find("connect") == std::string::npos)
        throw FileError(cx.spec + ": " + file + ": the server at " + cx.endpoint + " did not answer in time (" +
                        terminal_safe(r.curl_error) + "), and " + cx.ref.repo_id + " is not in the Hugging Face cache " +
                        cx.cache + ". Try again later, or check HF_ENDPOINT.");
    throw FileError(cx.spec + ": cannot connect to " + cx.endpoint + " to download " + file + " (" + r.curl_error +
                    "), and " + cx.ref.repo_id + " is not in the Hugging Face cache " + cx.cache +
                    ". Check the network connection (and HF_ENDPOINT, HTTPS_PROXY), or run where the model is cached.");
}

// ------------------------------------------------------------------ the cache

constexpr const char* kOptional[] = {"config.json", "preprocessor_config.json"};
constexpr const char* kWeights[] = {"model.safetensors", "pytorch_model.bin"};

// The commit refs/<rev> names; "" when there is none, or (why set) when it cannot be used.
std::string read_ref(const std::string& storage, const std::string& rev, std::string* why = nullptr) {
    std::string p = storage + "/refs/" + rev;
    if (!exists(p)) return "";
    try {
        std::string c = strip(read_file(p, 4096));
        if (!safe_component(c, 128)) {
            if (why) *why = "refs/" + rev + " holds '" + terminal_safe(c.substr(0, 60)) + "', not a commit id";
            return "";
        }
        return c;
    } catch (const FileError& e) {
        if (why) *why = e.what();
        return "";
    }
}

std::string snapshot_dir(const Ctx& cx, const std::string& commit) { return cx.storage + "/snapshots/" + commit; }
bool marked_missing(const Ctx& cx, const std::string& commit, const std::string& file) {
    return exists(cx.storage + "/.no_exist/" + commit + "/" + file);
}

// The snapshot if it holds weights.
std::optional<Snapshot> local_snapshot(const Ctx& cx, const std::string& commit) {
    if (commit.empty() || !safe_component(commit, 128)) return std::nullopt;
    Snapshot s;
    s.repo_id = cx.ref.repo_id;
    s.revision = cx.ref.revision;
    s.commit = commit;
    s.dir = snapshot_dir(cx, commit);
    for (const char* w : kWeights)
        if (is_file(s.dir + "/" + w)) { s.weights = s.dir + "/" + w; break; }
    if (s.weights.empty()) return std::nullopt;
    // A config that is there but not a file (a FIFO, /dev/zero) is named, never skipped.
    for (auto [name, dst] : {std::pair<const char*, std::string*>{"config.json", &s.config}, {"preprocessor_config.json", &s.preprocessor}}) {
        const std::string p = s.dir + "/" + name;
        struct stat sb;
        if (::stat(p.c_str(), &sb) != 0) continue;  // absent (or a link to a blob not there): asked for again
        check_regular_file(p);
        *dst = p;
    }
    return s;
}

// Whether the cache already knows, for each optional file, that it is there or that it is not.
bool settled(const Ctx& cx, const Snapshot& s) {
    for (const char* f : kOptional)
        if (!is_file(s.dir + "/" + f) && !marked_missing(cx, s.commit, f)) return false;
    return true;
}

void write_ref(const Ctx& cx, const std::string& rev, const std::string& commit) {
    if (rev == commit) return;
    std::string p = cx.storage + "/refs/" + rev;
    if (read_ref(cx.storage, rev) == commit) return;
    make_dirs(parent_of(p));
    write_file_replacing(p, commit);
}

void mark_missing(const Ctx& cx, const std::string& commit, const std::string& file) {
    std::string p = cx.storage + "/.no_exist/" + commit + "/" + file;
    try {
        make_dirs(parent_of(p));
        int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) ::close(fd);
    } catch (const FileError&) {
        // only a hint for the next run: a read-only cache still works
    }
}

// snapshots/<commit>/<file> -> ../../blobs/<etag>, replaced atomically.
void link_pointer(const std::string& pointer, const std::string& etag) {
    std::string target = "../../blobs/" + etag, tmp = pointer + ".tmp." + std::to_string(::getpid());
    ::unlink(tmp.c_str());
    if (::symlink(target.c_str(), tmp.c_str()) != 0)
        throw FileError(pointer + ": cannot create the symbolic link to " + target + ": " + std::strerror(errno));
    if (::rename(tmp.c_str(), pointer.c_str()) != 0) {
        int e = errno;
        ::unlink(tmp.c_str());
        throw FileError(pointer + ": cannot move the link into place: " + std::strerror(e));
    }
}

void cachedir_tag(const std::string& cache) {
    std::string p = cache + "/CACHEDIR.TAG";
    if (exists(p)) return;
    try {
        write_file_replacing(p, "Signature: 8a477f597d28d172789f06886806bc55\n"
                             "# This file is a cache directory tag created by huggingface_hub.\n"
                             "# For information about cache directory tags, see:\n#\thttps://bford.info/cachedir/\n");
    } catch (const FileError&) {
    }
}

// An exclusive lock on <cache>/.locks/models--ORG--NAME/<etag>.lock for as long as it lives:
// two processes never append to the same .incomplete blob.
class Lock {
public:
    Lock(const Ctx& cx, const std::string& etag, Progress p) {
        std::string dir = cx.cache + "/.locks/" + repo_folder(cx.ref.repo_id), path = dir + "/" + etag + ".lock";
        make_dirs(dir);
        fd_ = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
        if (fd_ < 0) throw FileError(path + ": cannot open the lock file: " + std::strerror(errno));
        p.waiting = true;
        while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
            if (errno != EWOULDBLOCK && errno != EINTR) {
                int e = errno;
                ::close(fd_);
                throw FileError(path + ": cannot lock: " + std::strerror(e));
            }
            if (cx.progress && !cx.progress(p)) {
                ::close(fd_);
                throw FileError(cx.spec + ": cancelled while another process was downloading " + p.file);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
    }
    ~Lock() { ::close(fd_); }  // closing releases the lock
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;

private:
    int fd_ = -1;
};

// ------------------------------------------------------------------ one file's download

struct Sink {
    int fd = -1;
    uint64_t start = 0;              // bytes on disk when this attempt began
    uint64_t expected = 0;           // the size the hub announced: never more is written
    uint64_t wrote = 0;              // bytes written by this attempt
    const Reply* reply = nullptr;
    bool checked = false, writing = false, restarted = false;
    std::string problem;             // why the body was refused
    std::string error_body;          // the start of an error response's body
    const Ctx* cx = nullptr;
    Progress progress;
    bool cancelled = false;
    std::chrono::steady_clock::time_point last{};
};

size_t on_body(char* p, size_t size, size_t n, void* ud) {
    Sink* s = static_cast<Sink*>(ud);
    const size_t len = size * n;
    const long st = s->reply->status;
    if (st >= 300 && st < 400) return len;  // the body of a redirect being followed
    if (!s->checked) {
        s->checked = true;
        if (st == 206) {
            // "bytes START-END/TOTAL": the part must start where the file on disk ends and end where
            // the announced file ends.
            std::string cr = s->reply->header("content-range");
            uint64_t b = 0, e = 0, total = 0;
            if (!parse_content_range(cr, b, e, total) || b != s->start || (total && total != s->expected) ||
                e + 1 != s->expected) {
                s->problem = "the server answered the range request from byte " + std::to_string(s->start) + " of " +
                             std::to_string(s->expected) + " with Content-Range '" + terminal_safe(cr.substr(0, 80)) + "'";
                return 0;
            }
            s->writing = true;
        } else if (st == 200) {
            if (s->start > 0) {  // Range ignored: the whole file comes again
                if (::ftruncate(s->fd, 0) != 0 || ::lseek(s->fd, 0, SEEK_SET) != 0) {
                    s->problem = std::string("cannot truncate the .incomplete file: ") + std::strerror(errno);
                    return 0;
                }
                s->start = 0;
                s->restarted = true;
            }
            s->writing = true;
        }
        if (s->writing && !s->reply->header("content-length").empty()) {
            // The body's own length must be what is missing of the announced file.
            const std::string cl = s->reply->header("content-length");
            uint64_t n = 0;
            try {
                n = parse_size(cl, "Content-Length");
            } catch (const FileError& e) {
                s->problem = std::string("the server sent ") + e.what();
                return 0;
            }
            if (n != s->expected - s->start) {
                s->problem = "the server sends " + std::to_string(n) + " bytes (Content-Length) from byte " +
                             std::to_string(s->start) + " of a file announced as " + std::to_string(s->expected) + " bytes";
                return 0;
            }
        }
    }
    if (!s->writing) {
        if (s->error_body.size() < 600) s->error_body.append(p, std::min(len, 600 - s->error_body.size()));
        return len;
    }
    if (len > s->expected - s->start - s->wrote) {  // never more than announced: an endless body stops here
        s->problem = "the server sent more than the " + std::to_string(s->expected) +
                     " bytes it announced (X-Linked-Size / Content-Length); stopped there";
        return 0;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t w = ::write(s->fd, p + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            s->problem = std::string("cannot write the .incomplete file: ") + std::strerror(errno);
            return 0;
        }
        done += size_t(w);
    }
    s->wrote += len;
    return len;
}

int on_xfer(void* ud, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    Sink* s = static_cast<Sink*>(ud);
    if (!s->cx->progress) return 0;
    auto now = std::chrono::steady_clock::now();
    if (now - s->last < std::chrono::milliseconds(200)) return 0;
    s->last = now;
    s->progress.done = s->start + s->wrote;
    if (!s->cx->progress(s->progress)) {
        s->cancelled = true;
        return 1;
    }
    s->progress.note.clear();
    return 0;
}

uint64_t file_size(int fd) {
    struct stat sb;
    return ::fstat(fd, &sb) == 0 ? uint64_t(sb.st_size) : 0;
}

// Downloads `url` (size `expected`) to blobs/<etag>: appended to blobs/<etag>.incomplete, resumed with
// Range from what is already there, retried while attempts make progress. Never more than `expected`
// bytes are written. An LFS file's ETag is its sha256: the finished bytes must hash to it, else they
// are discarded and the file downloaded once more from the start, then refused. Renamed into place
// only when complete (and verified).
void download_blob(const Ctx& cx, const std::string& file, const std::string& url, const std::string& blob,
                   const std::string& etag, uint64_t expected, Progress prog) {
    const std::string inc = blob + ".incomplete";
    int fd = ::open(inc.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) throw FileError(inc + ": cannot write: " + std::strerror(errno));
    struct Closer { int& fd; ~Closer() { if (fd >= 0) ::close(fd); } } closer{fd};
    if (struct stat sb; ::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        throw FileError(inc + ": not a regular file; delete it and run again");
    uint64_t have = file_size(fd);
    if (have > expected) {  // not this file's bytes: start over
        if (::ftruncate(fd, 0) != 0) throw FileError(inc + ": cannot truncate: " + std::strerror(errno));
        have = 0;
    }
    check_free_space(parent_of(blob), expected - have + (uint64_t(1) << 20), cx.spec + ": " + file);
    prog.resumed_from = have;
    prog.total = expected;
    const std::string server = origin(url);
    auto interrupted = [&](const std::string& why) {
        have = file_size(fd);
        throw FileError(cx.spec + ": the download of " + file + " from " + server + " was interrupted after " +
                        std::to_string(have) + " of " + std::to_string(expected) + " bytes (" + why + "). The " +
                        std::to_string(have) + " bytes are kept in " + inc + ": run again to resume.");
    };
    for (int attempt = 0;; ++attempt) {
        int retries = 0;
        while (have < expected) {
            if (::lseek(fd, off_t(have), SEEK_SET) < 0) throw FileError(inc + ": cannot seek: " + std::strerror(errno));
            Reply r;
            Headers hl(nullptr, curl_slist_free_all);
            char errbuf[CURL_ERROR_SIZE] = {};
            Easy e = make_easy(cx, url, r, hl, errbuf);
            CURL* c = e.get();
            Sink s;
            s.fd = fd;
            s.start = have;
            s.expected = expected;
            s.reply = &r;
            s.cx = &cx;
            s.progress = prog;
            curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
            curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
            curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
            curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
            curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
            curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_xfer);
            curl_easy_setopt(c, CURLOPT_XFERINFODATA, &s);
            std::string range = std::to_string(have) + "-";
            if (have > 0) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
            finish(r, curl_easy_perform(c), errbuf);
            if (char* eff = nullptr; curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &eff) == CURLE_OK && eff) r.url = eff;
            have = file_size(fd);
            prog.note.clear();
            if (s.cancelled)
                throw FileError(cx.spec + ": the download of " + file + " was cancelled after " + std::to_string(have) +
                                " of " + std::to_string(expected) + " bytes; they are kept in " + inc +
                                " and the next run resumes");
            if (!s.problem.empty()) {
                if (::ftruncate(fd, 0) != 0) {}
                throw FileError(cx.spec + ": " + file + " from " + printable(r.url) + ": " + s.problem + "; nothing kept");
            }
            if (r.code == CURLE_UNSUPPORTED_PROTOCOL || r.code == CURLE_TOO_MANY_REDIRECTS) {
                char* to = nullptr;
                std::string where;
                if (curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &to) == CURLE_OK && to) where = printable(to);
                throw FileError(cx.spec + ": " + file + ": the server at " + origin(r.url) + " redirected the download" +
                                (where.empty() ? "" : " to " + terminal_safe(where)) + ", which is refused (" +
                                terminal_safe(r.curl_error) + "; only http and https, at most 5 redirects). " +
                                std::to_string(have) + " of " + std::to_string(expected) + " bytes downloaded; " +
                                "is HF_ENDPOINT a Hugging Face hub (or a mirror of one)?");
            }
            if (r.code == CURLE_OPERATION_TIMEDOUT) {
                throw FileError(cx.spec + ": the download of " + file + " from " + origin(r.url) + " is too slow: under " +
                                std::to_string(kMinBytesPerSecond) + " bytes a second for " + std::to_string(stall_seconds()) +
                                " s (HF_HUB_DOWNLOAD_TIMEOUT), " + std::to_string(have) + " of " + std::to_string(expected) +
                                " bytes received. They are kept in " + inc + ": run again to resume.");
            }
            if (r.code != CURLE_OK && malformed_reply(r.code)) {
                if (::ftruncate(fd, 0) != 0) {}
                throw FileError(cx.spec + ": " + file + ": the server at " + origin(r.url) +
                                " sent a reply that is not valid HTTP (" + terminal_safe(r.curl_error) + "); nothing kept");
            }
            if (r.code == CURLE_OK && r.status >= 400) {
                if (r.status == 416 && have > 0 && retries++ == 0) {  // the range no longer fits: start over once
                    if (::ftruncate(fd, 0) != 0) throw FileError(inc + ": cannot truncate: " + std::strerror(errno));
                    have = 0;
                    continue;
                }
                if (origin(r.url) == origin(cx.endpoint)) http_error(cx, file, r);
                // A storage host's refusal (an expired signed URL, say): its own words.
                std::string body = s.error_body;
                for (char& ch : body)
                    if (ch == '\n' || ch == '\r' || static_cast<unsigned char>(ch) < 32) ch = ' ';
                throw FileError(cx.spec + ": " + file + ": HTTP " + std::to_string(r.status) + " from " + printable(r.url) +
                                (body.empty() ? std::string() : " (" + terminal_safe(body.substr(0, 300)) + ")") +
                                "; run again to retry");
            }
            if (r.code == CURLE_OK && r.status != 200 && r.status != 206) {
                throw FileError(cx.spec + ": " + file + ": HTTP " + std::to_string(r.status) + " from " + printable(r.url) +
                                " instead of the file's bytes; is HF_ENDPOINT a Hugging Face hub (or a mirror of one)?");
            }
            if (have == expected) break;
            // Short: the connection dropped (or the server ended the body early). Go on from here
            // while attempts bring new bytes, as huggingface_hub does.
            const std::string why = r.code != CURLE_OK ? r.curl_error : "the server ended the transfer early";
            if (s.wrote == 0 || ++retries > 5) interrupted(why);
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
        if (!is_sha256(etag)) break;
        const std::string got = sha256_fd(fd, inc);
        if (got == etag) break;
        // Not the file the hub names: a resumed part from another file, a shifted range, another
        // file of the same size. Never kept under the name of a hash it does not have.
        if (::ftruncate(fd, 0) != 0) throw FileError(inc + ": cannot truncate: " + std::strerror(errno));
        have = 0;
        if (attempt == 1)
            throw FileError(cx.spec + ": " + file + " from " + server + " is not the file the hub names: its bytes hash to sha256 " +
                            got + ", the hub's ETag is " + etag + " (downloaded twice, the second time from the start); "
                            "nothing kept. Try again later, or check HF_ENDPOINT and any proxy between.");
        prog.resumed_from = 0;
        prog.note = "the " + std::to_string(expected) + " bytes of " + file + " do not hash to its sha256 " + etag.substr(0, 12) +
                    "...; discarded, downloading it again from the start";
        if (cx.progress) cx.progress(prog);
        prog.note.clear();
    }
    if (cx.progress) {
        prog.done = have;
        cx.progress(prog);
    }
    if (::fsync(fd) != 0) throw FileError(inc + ": cannot flush to disk: " + std::strerror(errno));
    ::close(fd);
    fd = -1;
    if (::rename(inc.c_str(), blob.c_str()) != 0)
        throw FileError(blob + ": cannot move the finished download into place: " + std::strerror(errno));
}

// ------------------------------------------------------------------ resolving a revision

struct Meta {
    std::string file, url, etag, commit;
    uint64_t size = 0;
};

std::string file_url(const Ctx& cx, const std::string& rev, const std::string& file) {
    return cx.endpoint + "/" + cx.ref.repo_id + "/resolve/" + quote(rev, "") + "/" + quote(file, "/");
}

// HEAD for one file: its commit, blob name, size and where its bytes are. nullopt: 404 (no such
// file; recorded in .no_exist). Throws for every other failure, after `fallback` had its chance.
enum class HeadFail { None, Network, Malformed, Http };
std::optional<Meta> head_file(const Ctx& cx, const std::string& rev, const std::string& file, Reply* failed,
                              HeadFail* how) {
    *how = HeadFail::None;
    std::string url = file_url(cx, rev, file);
    Reply r = head(cx, url);
    if (r.code != CURLE_OK) {
        *failed = r;
        *how = malformed_reply(r.code) ? HeadFail::Malformed : HeadFail::Network;
        return std::nullopt;
    }
    const std::string code = r.header("x-error-code");
    if (r.status == 404 && (code.empty() || code == "EntryNotFound")) {
        std::string c = r.header("x-repo-commit");
        if (safe_component(c, 128)) {
            mark_missing(cx, c, file);
            write_ref(cx, cx.ref.revision, c);
        }
        return std::nullopt;
    }
    if (r.status >= 400 || r.status < 200) {
        *failed = r;
        *how = HeadFail::Http;
        return std::nullopt;
    }
    Meta m;
    m.file = file;
    HeadFields f;
    try {
        f = head_fields(r.status, r.headers);
    } catch (const FileError& e) {
        throw FileError(cx.spec + ": " + file + ": the server at " + cx.endpoint + " " + e.what() +
                        "; is HF_ENDPOINT a Hugging Face hub (or a mirror of one)?");
    }
    m.commit = f.commit;
    m.etag = f.etag;
    m.size = f.size;
    m.url = r.url;
    if (f.redirect)
        m.url = f.location.find("://") != std::string::npos ? f.location
                                                             : origin(r.url) + (f.location[0] == '/' ? "" : "/") + f.location;
    return m;
}

std::string revision_label(const Ref& r) { return r.revision == "main" ? "" : "@" + r.revision; }

// Fetches what is missing. `cached`: a snapshot that has the weights but not yet word of every
// optional file; those are asked for at its commit (so a newer main never pulls a second copy of the
// weights), and it is returned as it is when the hub cannot be reached. Without it: the revision.
Snapshot fetch(const Ctx& cx, const std::optional<Snapshot>& cached) {
    std::string commit = cached ? cached->commit : "";
    std::vector<Meta> metas;
    Reply failed;
    HeadFail how = HeadFail::None;
    auto give_up = [&](const std::string& file) {
        if (cached) return true;  // use what the cache has, as huggingface_hub does without a network
        if (how == HeadFail::Network) no_network(cx, file, failed);
        if (how == HeadFail::Malformed) malformed(cx, file, failed);
        http_error(cx, file, failed);
    };
    auto rev = [&] { return commit.empty() ? cx.ref.revision : commit; };
    bool have_weights = cached.has_value();
    std::vector<std::string> wanted(std::begin(kOptional), std::end(kOptional));
    if (!have_weights) wanted.insert(wanted.end(), std::begin(kWeights), std::end(kWeights));
    for (const std::string& f : wanted) {
        const bool weight = std::find(std::begin(kWeights), std::end(kWeights), f) != std::end(kWeights);
        if (weight && have_weights) continue;
        if (!commit.empty() && (is_file(snapshot_dir(cx, commit) + "/" + f) || marked_missing(cx, commit, f))) {
            if (weight && is_file(snapshot_dir(cx, commit) + "/" + f)) have_weights = true;
            continue;
        }
        std::optional<Meta> m = head_file(cx, rev(), f, &failed, &how);
        if (how != HeadFail::None) {
            if (give_up(f)) return *cached;
        }
        if (!m) continue;
        if (commit.empty()) {
            commit = m->commit;  // every later file at this commit: one consistent snapshot
            write_ref(cx, cx.ref.revision, commit);
        } else if (m->commit != commit) {
            throw FileError(cx.spec + ": " + f + ": the server reports commit " + m->commit + " for revision " + rev() +
                            " (expected " + commit + ")");
        }
        metas.push_back(*m);
        if (weight) have_weights = true;
    }
    if (!have_weights) {
        // Say why: a sharded checkpoint is the usual reason for a large model.
        Reply r2;
        HeadFail h2;
        std::string shard = head_file(cx, rev(), "model.safetensors.index.json", &r2, &h2) ? "; it is sharded "
            "(model.safetensors.index.json), which this loader does not read yet" : "";
        throw FileError(cx.spec + ": " + cx.ref.repo_id + " has neither model.safetensors nor pytorch_model.bin at revision " +
                        cx.ref.revision + (commit.empty() || commit == cx.ref.revision ? "" : " (commit " + commit + ")") +
                        " on " + cx.endpoint + " (HTTP 404 for both)" + shard);
    }
    // Download what the cache lacks.
    std::vector<const Meta*> todo;
    for (const Meta& m : metas)
        if (!is_file(snapshot_dir(cx, commit) + "/" + m.file)) todo.push_back(&m);
    if (!todo.empty()) {
        make_dirs(cx.storage + "/blobs");
        make_dirs(snapshot_dir(cx, commit));
        cachedir_tag(cx.cache);
    }
    std::vector<std::string> downloaded;
    for (size_t i = 0; i < todo.size(); ++i) {
        const Meta& m = *todo[i];
        const std::string blob = cx.storage + "/blobs/" + m.etag, pointer = snapshot_dir(cx, commit) + "/" + m.file;
        Progress p;
        p.repo_id = cx.ref.repo_id;
        p.file = m.file;
        p.total = m.size;
        p.index = int(i) + 1;
        p.count = int(todo.size());
        if (!is_file(blob)) {
            Lock lock(cx, m.etag, p);
            if (!is_file(blob)) {  // another process may have finished it meanwhile
                download_blob(cx, m.file, m.url, blob, m.etag, m.size, p);
                downloaded.push_back(m.file);
            }
        }
        struct stat sb;
        if (::stat(blob.c_str(), &sb) != 0 || uint64_t(sb.st_size) != m.size)
            throw FileError(cx.spec + ": " + blob + " holds " + std::to_string(::stat(blob.c_str(), &sb) == 0 ? sb.st_size : 0) +
                            " bytes but the server says " + m.file + " has " + std::to_string(m.size) +
                            ": delete it and run again");
        link_pointer(pointer, m.etag);
    }
    std::optional<Snapshot> s = local_snapshot(cx, commit);
    if (!s) throw FileError(cx.spec + ": the weights are not in " + snapshot_dir(cx, commit) + " after the download");
    s->downloaded = downloaded;
    return *s;
}

std::string token_from_env(std::string* from) {
    for (const char* k : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}) {
        std::string t = strip(env(k));
        if (!t.empty()) {
            *from = k;
            return t;
        }
    }
    std::string path = env("HF_TOKEN_PATH");
    if (path.empty()) {
        std::string hf_home = env("HF_HOME");
        path = (hf_home.empty() ? xdg_cache() + "/huggingface" : expand_user(hf_home)) + "/token";
    } else {
        path = expand_user(path);
    }
    if (is_file(path)) {
        try {
            std::string t = strip(read_file(path, 4096));
            if (!t.empty()) {
                *from = path + " (written by 'huggingface-cli login')";
                return t;
            }
        } catch (const FileError&) {
        }
    }
    return "";
}

}  // namespace

// ------------------------------------------------------------------ public (the pure ones: hub_parse.cpp)

std::string cache_dir() {
    for (const char* k : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"})
        if (std::string v = env(k); !v.empty()) return expand_user(v);
    std::string hf_home = env("HF_HOME");
    return (hf_home.empty() ? xdg_cache() + "/huggingface" : expand_user(hf_home)) + "/hub";
}

std::string endpoint() {
    std::string e = strip(env("HF_ENDPOINT"));
    if (e.empty()) e = "https://huggingface.co";
    while (!e.empty() && e.back() == '/') e.pop_back();
    return e;
}

bool offline_env() { return is_true(env("HF_HUB_OFFLINE")) || is_true(env("TRANSFORMERS_OFFLINE")); }

std::string torch_checkpoints_dir() {
    std::string t = env("TORCH_HOME");
    return (t.empty() ? xdg_cache() + "/torch" : expand_user(t)) + "/hub/checkpoints";
}

Snapshot resolve(const Ref& ref, const FetchOptions& opt) {
    parse_spec("hf:" + ref.repo_id + "@" + ref.revision);  // names become paths: checked whoever built the Ref
    Ctx cx;
    cx.ref = ref;
    cx.spec = "hf:" + ref.repo_id + revision_label(ref);
    cx.cache = opt.cache_dir.empty() ? cache_dir() : opt.cache_dir;
    while (cx.cache.size() > 1 && cx.cache.back() == '/') cx.cache.pop_back();
    cx.storage = cx.cache + "/" + repo_folder(ref.repo_id);
    cx.endpoint = opt.endpoint.empty() ? endpoint() : opt.endpoint;
    cx.progress = opt.progress;
    const bool offline = opt.offline || offline_env();

    std::string bad_ref;
    const std::string commit = is_commit(ref.revision) ? ref.revision : read_ref(cx.storage, ref.revision, &bad_ref);
    std::optional<Snapshot> cached = local_snapshot(cx, commit);
    if (cached && (offline || settled(cx, *cached))) return *cached;
    if (offline) {
        std::string detail;
        if (!exists(cx.storage)) detail = "no folder " + repo_folder(ref.repo_id);
        else if (commit.empty() && !bad_ref.empty()) detail = bad_ref;
        else if (commit.empty()) detail = "no refs/" + ref.revision + " in " + repo_folder(ref.repo_id);
        else detail = "snapshot " + commit + " has no model.safetensors or pytorch_model.bin";
        std::string why = opt.offline ? "--offline" : is_true(env("HF_HUB_OFFLINE")) ? "HF_HUB_OFFLINE=" + env("HF_HUB_OFFLINE")
                                                                                      : "TRANSFORMERS_OFFLINE=" + env("TRANSFORMERS_OFFLINE");
        throw FileError(cx.spec + ": not in the Hugging Face cache " + cx.cache + " (" + detail + "), and downloads are off (" +
                        why + "). Run once without " + why + " to download " + ref.repo_id + " from " + cx.endpoint + ".");
    }
    cx.token = token_from_env(&cx.token_from);
    return fetch(cx, cached);
}

}  // namespace vit::hub
