// Models from the places they already are: the Hugging Face hub cache (read in its standard
// layout, and filled the way huggingface_hub fills it when a model is not there yet) and
// torch.hub's checkpoints folder. No xtensor here.
//
// Cache layout (huggingface_hub's file_download.py):
//   <cache>/models--ORG--NAME/refs/<revision>            the commit the revision pointed to
//   <cache>/models--ORG--NAME/blobs/<etag>               file contents, named by the server's ETag
//   <cache>/models--ORG--NAME/snapshots/<commit>/<file>  relative symlink to ../../blobs/<etag>
//   <cache>/models--ORG--NAME/.no_exist/<commit>/<file>  empty: the repository has no such file
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace vit::hub {

// "hf:ORG/NAME[@REV]": a model repository on the hub, at a branch, tag or commit (default main).
struct Ref {
    std::string repo_id;            // ORG/NAME (NAME alone for the hub's old top-level models)
    std::string revision = "main";
};
bool is_spec(const std::string& spec);          // starts with "hf:"
Ref parse_spec(const std::string& spec);        // FileError naming the spec when malformed
std::string repo_folder(const std::string& repo_id);  // "models--ORG--NAME"

// Where things are, from the environment, as huggingface_hub and torch.hub read it.
std::string cache_dir();       // $HF_HUB_CACHE, $HUGGINGFACE_HUB_CACHE, $HF_HOME/hub, ${XDG_CACHE_HOME:-~/.cache}/huggingface/hub
std::string endpoint();        // $HF_ENDPOINT without a trailing '/', else https://huggingface.co
bool offline_env();            // HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is 1, ON, YES or TRUE
std::string torch_checkpoints_dir();  // $TORCH_HOME/hub/checkpoints, else ${XDG_CACHE_HOME:-~/.cache}/torch/hub/checkpoints

// A transfer under way. Reported at least every few hundred milliseconds and once at the end.
struct Progress {
    std::string repo_id, file;
    uint64_t done = 0, total = 0;  // bytes of this file on disk; total 0: not known
    uint64_t resumed_from = 0;     // bytes kept from an earlier, interrupted transfer
    int index = 0, count = 0;      // this file's number among the files this call downloads
    bool waiting = false;          // waiting for another process downloading the same file
    std::string note;              // said once when set: "the bytes did not match their sha256, downloading again"
};
// Return false to cancel: the bytes so far stay in the .incomplete blob and the next call resumes.
using ProgressFn = std::function<bool(const Progress&)>;

struct FetchOptions {
    bool offline = false;       // never touch the network (also when offline_env())
    ProgressFn progress;
    std::string cache_dir;      // empty: cache_dir()
    std::string endpoint;       // empty: endpoint()
};

// A snapshot of a repository in the cache, with the files a ViT needs.
struct Snapshot {
    std::string repo_id, revision, commit;
    std::string dir;            // <cache>/models--ORG--NAME/snapshots/<commit>
    std::string weights;        // dir/model.safetensors, else dir/pytorch_model.bin
    std::string config;         // dir/config.json; "" when the repository has none
    std::string preprocessor;   // dir/preprocessor_config.json; "" when none
    std::vector<std::string> downloaded;  // the files this call fetched
};

// The snapshot `ref` names. When the cache holds its weights (and knows whether config.json and
// preprocessor_config.json exist) nothing touches the network. Otherwise, unless offline, the
// files come from the endpoint into the cache: HEAD for the commit (X-Repo-Commit), the blob's name
// (X-Linked-Etag, else ETag) and size; the body to blobs/<etag>.incomplete, resumed with a Range
// request when an earlier transfer was cut; renamed into place once complete; the snapshot entry a
// relative symlink to it; refs/<revision> written. Errors (FileError) name the repository, the
// file and what to do: 401/403 (log in or set HF_TOKEN), 404, no network (naming the endpoint),
// offline with nothing cached. Sends "Authorization: Bearer <token>" to the endpoint's host when
// HF_TOKEN (or HUGGING_FACE_HUB_TOKEN, or the token file huggingface-cli login writes) is set.
Snapshot resolve(const Ref& ref, const FetchOptions& opt = {});

// ------------------------------------------------------------ the server's replies, checked
// Public for the tests and the fuzz harness (tests/fuzz/fuzz_hub.cpp): every header a download
// acts on goes through these.

// The most a download may be (X-Linked-Size / Content-Length above it are refused): 64 GiB.
constexpr uint64_t kMaxDownloadBytes = uint64_t(64) << 30;
// A transfer slower than this many bytes a second, on average over the stall window, fails.
constexpr long kMinBytesPerSecond = 1024;
// The stall window in seconds: $HF_HUB_DOWNLOAD_TIMEOUT (1..3600), else 30.
long stall_seconds();

// One header line of a reply into `status` (a status line "HTTP/1.1 206 ...": the headers so far
// are dropped, a new response begins) or `headers` (name lower-cased, value stripped).
void parse_header_line(const std::string& line, long& status, std::map<std::string, std::string>& headers);
// A size header's value: decimal digits only, at most kMaxDownloadBytes. Anything else ("-1", "-0",
// "+7", "1e9", "0x10", "", 21 digits) is a FileError naming the header and the value.
uint64_t parse_size(const std::string& value, const std::string& header);
// "bytes START-END/TOTAL" (TOTAL may be '*': 0 is returned for it); false when malformed.
bool parse_content_range(const std::string& value, uint64_t& start, uint64_t& end, uint64_t& total);
// What a HEAD reply for a file says: its commit, blob name (X-Linked-Etag, else ETag; W/ and quotes
// dropped), size (X-Linked-Size, else Content-Length when not redirected) and, redirected, where the
// bytes are (Location). FileError with what is wrong, without a prefix ("sent no ETag").
struct HeadFields {
    std::string commit, etag, location;
    uint64_t size = 0;
    bool redirect = false;
};
HeadFields head_fields(long status, const std::map<std::string, std::string>& headers);
// A blob named by its sha256 (an LFS file's ETag on the hub): 64 lower-case hex digits.
bool is_sha256(const std::string& etag);
// SHA-256 of bytes, and of a file's contents, as 64 lower-case hex digits.
std::string sha256_hex(const std::string& bytes);
std::string sha256_file(const std::string& path);
std::string sha256_fd(int fd, const std::string& what);  // an open file's, from its start (`what` names it in errors)
// FileError naming `what` and `dir` when the file system of `dir` has fewer than `need` bytes free.
void check_free_space(const std::string& dir, uint64_t need, const std::string& what);

// ------------------------------------------------------------ models on this computer

// What a checkpoint is, from its tensor names and shapes (and a config.json beside it).
struct Identity {
    bool vit = false;           // a Vision Transformer of a family listed here
    std::string family;         // "ViT (timm)", "DINOv2 with 4 registers (Hugging Face)", ..., or "not a ViT (...)"
    std::string size;           // "ViT-B/16, 224 px, 1000 classes"
    int64_t params = 0;         // numbers in the file (all its tensors)
};
// shapes: tensor name -> shape. config_json: the text of a config.json beside the file, or "".
Identity identify(const std::map<std::string, std::vector<size_t>>& shapes, const std::string& config_json = "");

struct Found {
    std::string spec;           // what --model takes: "hf:ORG/NAME[@REV]" or the file's path
    std::string where;          // "huggingface" or "torch.hub"
    std::string path;           // the weights file
    uint64_t bytes = 0;         // its size
    Identity id;
    std::string note;           // why it could not be read, when it could not
};
// The checkpoints in the Hugging Face cache and torch.hub's checkpoints folder (empty arguments:
// the folders the environment names). Reads headers and configs only, never the weights.
// The two folders given are followed if they are links; below them no directory link is followed
// (refs/a -> . would loop, refs/x -> /usr would walk the disk), and the scan is bounded.
struct ScanLimits {
    int max_depth = 8;                 // nested refs (refs/pr/1: 2)
    size_t max_entries = 200000;       // names read in all folders together
    size_t max_per_folder = 20000;     // names read in one folder
    double max_seconds = 60;           // wall time
};
struct ScanProgress {
    size_t done = 0, total = 0;        // repositories and checkpoints examined, of those listed
    std::string current;               // the one being examined
};
struct ScanResult {
    std::vector<Found> found;
    std::string stopped;               // "" when complete, else why it stopped early (a limit, cancelled)
};
// progress: called before each repository or checkpoint; false cancels (the result so far is kept).
ScanResult scan_models(const std::string& hf_cache = "", const std::string& torch_dir = "", const ScanLimits& limits = {},
                       const std::function<bool(const ScanProgress&)>& progress = {});
std::vector<Found> find_models(const std::string& hf_cache = "", const std::string& torch_dir = "");

}  // namespace vit::hub
