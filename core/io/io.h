// File formats: .safetensors (read F32/F16/BF16/F64, write F32), .npy/.npz,
// and atomic file writes.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/model/model.h"
#include "core/model/tensor.h"

namespace vit {

// Every error about a user's file carries the file's name (and the tensor's).
struct FileError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Runs f(); a std::bad_alloc escaping it (memory the input asked for that the
// process could not get) becomes a FileError naming `what` and what was being
// done: no bad_alloc reaches the user without the file it came from.
template <class F>
auto name_out_of_memory(const std::string& what, const char* doing, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const std::bad_alloc&) {
        throw FileError(what + ": out of memory while " + doing + " (std::bad_alloc: more memory than this process could get)");
    }
}

struct SafeTensors {
    std::map<std::string, Array> tensors;             // converted to float32
    std::map<std::string, std::string> dtypes;        // as stored ("F16", ...)
    std::map<std::string, std::string> metadata;      // __metadata__
};

// Maps a regular file read-only and returns parse(bytes, size) (an empty file gives
// (nullptr, 0)); unmaps afterwards, also when parse throws. Errors name the file.
SafeTensors parse_mapped(const std::string& path, const std::function<SafeTensors(const char*, size_t)>& parse);

// IEEE 754 half (F16 / torch.float16) bits to float, exactly.
float half_to_float(uint16_t h);

// Reads and validates: size >= 8, header <= 100 MB and inside the file, UTF-8
// JSON object without duplicate keys, known dtypes, shape x dtype == byte span
// (overflow-checked), offsets contiguous from 0 with no gap or overlap, and the
// buffer ending exactly at the end of the file.
SafeTensors read_safetensors(const std::string& path);
SafeTensors parse_safetensors(const std::string& bytes, const std::string& what);
SafeTensors parse_safetensors(const char* bytes, size_t size, const std::string& what);

// A checkpoint's tensor names with their stored dtypes and shapes, from its header alone:
// no tensor data is read (listing the models on a disk must not load them).
struct TensorIndex {
    std::map<std::string, std::pair<std::string, Shape>> tensors;  // name -> (dtype as stored, shape)
    std::map<std::string, std::string> metadata;
};
// The JSON header of a .safetensors file, validated as read_safetensors does (dtypes, shapes,
// byte spans inside the file) except for the data itself.
TensorIndex index_safetensors(const std::string& path);

// Writes F32 tensors (sorted by name) atomically.
void write_safetensors(const std::string& path, const std::vector<ArrayRef>& tensors,
                       const std::map<std::string, std::string>& metadata);

// .npy of a float32 tensor, as bytes.
std::string npy_bytes(const float* data, const Shape& shape);
// Reads a .npy holding float32 or float64 (C order).
Array read_npy(const std::string& path);
Array parse_npy(const std::string& bytes, const std::string& what);
// A 0-d numpy unicode array ('<U<n>') holding `text` (UTF-8), as .npy bytes:
// str(np.load(f)) gives the text back, no pickle needed.
std::string npy_text_bytes(const std::string& text);
// A tensor of an .npz whose data is made only when the writer reaches it: `data()` is called once,
// when its entry is written, and must return `shape`'s floats, valid until `done()` (if set) is
// called right after the entry is written. Entries are written in order, one at a time.
struct LazyTensor {
    std::string name;
    Shape shape;
    std::function<const float*()> data;
    std::function<void()> done;
};
// write_npz with tensors made as the writer reaches them (a trace written stage by stage).
void write_npz_streamed(const std::string& path, const std::vector<LazyTensor>& tensors,
                        const std::vector<std::pair<std::string, std::string>>& texts = {});

// Writes a .npz (zip, stored) atomically; entries named "<name>.npy", the tensors in
// order, then the texts (0-d unicode arrays, e.g. "__options__").
void write_npz(const std::string& path, const std::vector<ArrayRef>& tensors,
               const std::vector<std::pair<std::string, std::string>>& texts = {});

// Text from a file (class names, tensor names, paths) made safe to print on a
// terminal: control characters (ESC, CR, BEL, ..., DEL, and the C1 controls
// U+0080..U+009F) and invalid UTF-8 bytes are written as \xNN escapes; a
// backslash is doubled. keep_newlines leaves '\n' (multi-line messages) as it is.
std::string terminal_safe(const std::string& text, bool keep_newlines = false);

// Refuses, before anything opens or reads it, a path that is not a regular file: "PATH: is a
// character device, not a regular file" (/dev/zero, /dev/null), "is a directory", "is a FIFO (a
// pipe)", "is a socket", "is a block device"; a path that does not exist: "PATH: No such file or
// directory". Links are followed (/dev/stdin redirected from a file is that file). Nothing reads
// an endless device or waits on a pipe's other end.
void check_regular_file(const std::string& path);
// Whole-file read with a clear error; max_bytes guards against absurd files. Only a regular file
// is read (check_regular_file).
std::string read_file(const std::string& path, size_t max_bytes = size_t(1) << 36);
// Where an output goes. Every writer here (write_file_atomic, write_npz, write_safetensors,
// write_png) goes through it, so that a write never clobbers what it should not:
// - "" is refused;
// - a symbolic link is written through (the file it names is replaced, the link stays); a link
//   whose target does not exist is refused by name;
// - a character device (/dev/null, a terminal) or a FIFO (a pipe as /dev/stdout) is written in
//   place, never renamed over (`in_place`); a directory, a socket and a block device are refused;
// - an existing regular file keeps its mode (0600 stays 0600) and, as root, its owner; a read-only
//   one is refused.
struct OutputTarget {
    std::string path;          // the file a temporary one replaces (a link's target, resolved)
    bool in_place = false;     // not a regular file: written in place
    bool existed = false;      // a regular file is there: mode, uid, gid are its own
    unsigned mode = 0644, uid = 0, gid = 0;
};
OutputTarget output_target(const std::string& path);
// Whether two paths name the same existing file (links followed): an output must not be an input.
bool same_file(const std::string& a, const std::string& b);
// Writes atomically (a temporary file in the same directory, fsync, rename) as output_target says;
// in place to a device or FIFO.
void write_file_atomic(const std::string& path, const std::string& bytes);
// Writes atomically and replaces whatever entry `path` is, a link included, never writing through
// it: for files inside a cache this program owns (refs/main, markers), where a link is hostile.
void write_file_replacing(const std::string& path, const std::string& bytes);

}  // namespace vit
