// torch.save zip checkpoints: libzip for the archive, a restricted unpickler
// for data.pkl. See pth.h.
#include "core/io/pth.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <unordered_map>

namespace vit {

namespace {

// ------------------------------------------------------------------ dtypes

enum class DT { F32, F16, BF16, F64, I64, I32, I16, I8, U8, Bool, None };

struct DTInfo { DT dt; const char* storage; const char* dtype; const char* st_name; size_t size; };
// torch.<storage> and torch.<dtype> globals, the safetensors name, the element size.
const DTInfo kDTypes[] = {
    {DT::F32, "FloatStorage", "float32", "F32", 4},   {DT::F16, "HalfStorage", "float16", "F16", 2},
    {DT::BF16, "BFloat16Storage", "bfloat16", "BF16", 2}, {DT::F64, "DoubleStorage", "float64", "F64", 8},
    {DT::I64, "LongStorage", "int64", "I64", 8},      {DT::I32, "IntStorage", "int32", "I32", 4},
    {DT::I16, "ShortStorage", "int16", "I16", 2},     {DT::I8, "CharStorage", "int8", "I8", 1},
    {DT::U8, "ByteStorage", "uint8", "U8", 1},        {DT::Bool, "BoolStorage", "bool", "BOOL", 1},
};
const DTInfo& info(DT d) {
    for (auto& i : kDTypes) if (i.dt == d) return i;
    return kDTypes[0];
}
bool is_float(DT d) { return d == DT::F32 || d == DT::F16 || d == DT::BF16 || d == DT::F64; }

inline float load_float(DT dt, const unsigned char* p) {  // memcpy: the data may be unaligned
    switch (dt) {
        case DT::F32: { float v; std::memcpy(&v, p, 4); return v; }
        case DT::F64: { double v; std::memcpy(&v, p, 8); return float(v); }
        case DT::F16: { uint16_t v; std::memcpy(&v, p, 2); return half_to_float(v); }
        default: { uint16_t v; std::memcpy(&v, p, 2); uint32_t b = uint32_t(v) << 16; float f; std::memcpy(&f, &b, 4); return f; }
    }
}

// The one place a tensor is constructed (see HELPERS: the Tensor type is changing).
Array make_tensor(const Shape& shape) { return empty_array(shape); }

// ------------------------------------------------------------------ pickle values

// What the allowed globals are.
enum class G { OrderedDict, RebuildTensorV2, RebuildParameter, RebuildParameterWithState, Storage, UntypedStorage, DType,
               ClassTag,   // a class only ever instantiated empty by NEWOBJ and filled by BUILD (never called)
               JitList };  // torch.jit._pickle's build_*list / restore_type_tag: they return their argument

struct Val {
    enum Kind { None, Bool, Int, Float, Str, Tuple, List, Dict, Global, Storage, Tensor, Object } kind = None;
    int64_t i = 0;
    double f = 0;
    std::string s;                          // Str; Global and Object: "module.name" (the class); Storage: key
    std::vector<Val*> items;                // Tuple, List
    std::vector<std::pair<Val*, Val*>> dict;  // Dict, in insertion order; Object: its attributes (BUILD)
    G g = G::OrderedDict;                   // Global
    DT dt = DT::None;                       // Global (Storage, DType), Storage, Tensor
    // Storage: numel as the pickle states it. Tensor: its view.
    uint64_t numel = 0;
    Val* storage = nullptr;
    uint64_t offset = 0;
    struct View { std::vector<uint64_t> shape, stride; };
    View* view = nullptr;                   // Tensor: its size and stride (kept apart: most values need none)
};

const char* kind_name(Val::Kind k) {
    switch (k) {
        case Val::None: return "None"; case Val::Bool: return "bool"; case Val::Int: return "int";
        case Val::Float: return "float"; case Val::Str: return "str"; case Val::Tuple: return "tuple";
        case Val::List: return "list"; case Val::Dict: return "dict"; case Val::Global: return "global";
        case Val::Storage: return "storage"; case Val::Tensor: return "tensor"; case Val::Object: return "object";
    }
    return "?";
}

// ------------------------------------------------------------------ the archive

struct Entry { zip_uint64_t index; zip_uint64_t size; };

class Archive {
public:
    Archive(const char* bytes, size_t size, const std::string& what) : what_(what), input_size_(size) {
        zip_error_t ze;
        zip_error_init(&ze);
        zip_source_t* src = zip_source_buffer_create(bytes, size, 0, &ze);
        if (!src) fail_zip("cannot read the archive", &ze);
        z_.reset(zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze));
        if (!z_) {
            zip_source_free(src);
            if (zip_error_code_zip(&ze) == ZIP_ER_EXISTS)  // libzip's consistency check: a name given twice
                fail_zip("the zip archive holds two entries of the same name (which one is meant is not said; "
                         "torch.save never writes this)", &ze);
            fail_zip("not a readable zip archive (truncated, or a bad zip directory)", &ze);
        }
        zip_int64_t n = zip_get_num_entries(z_.get(), 0);
        if (n < 0) throw FileError(what_ + ": bad zip directory");
        // One pass over the directory: the folder holding data.pkl names the checkpoint.
        std::vector<std::pair<std::string, Entry>> all;
        for (zip_int64_t i = 0; i < n; ++i) {
            zip_stat_t st;
            zip_stat_init(&st);
            if (zip_stat_index(z_.get(), zip_uint64_t(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
                !(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE))
                throw FileError(what_ + ": bad zip directory (entry " + std::to_string(i) + " unreadable)");
            std::string name = st.name;
            if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE)
                throw FileError(what_ + ": zip entry '" + name + "' is encrypted");
            // Check sizes before anything is allocated: a stored entry is exactly its
            // compressed size; deflate expands at most ~1032x.
            bool stored = (st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method == ZIP_CM_STORE;
            if (st.comp_size > input_size_ || (stored && st.size != st.comp_size) ||
                (!stored && st.size / 1100 > st.comp_size + 4))
                throw FileError(what_ + ": zip entry '" + name + "' declares " + std::to_string(st.size) + " bytes from " +
                                std::to_string(st.comp_size) + " compressed: impossible (corrupt archive or zip bomb)");
            all.emplace_back(name, Entry{zip_uint64_t(i), st.size});
        }
        for (auto& [name, e] : all) {
            auto slash = name.find('/');
            if (slash != std::string::npos && name.compare(slash, std::string::npos, "/data.pkl") == 0) {
                if (!prefix_.empty())
                    throw FileError(what_ + ": the archive holds two checkpoints ('" + prefix_ + "data.pkl' and '" + name + "')");
                prefix_ = name.substr(0, slash + 1);
            }
        }
        if (prefix_.empty()) {
            if (all.empty()) throw FileError(what_ + ": the zip archive is empty, not a torch.save checkpoint");
            throw FileError(what_ + ": a zip archive without <folder>/data.pkl, not a torch.save checkpoint (first entry '" +
                            all.front().first + "')");
        }
        for (auto& [name, e] : all)
            if (name.compare(0, prefix_.size(), prefix_) == 0) entries_.emplace(name.substr(prefix_.size()), e);
    }
    Archive(const Archive&) = delete;
    Archive& operator=(const Archive&) = delete;

    const Entry* find(const std::string& rel) const {
        auto it = entries_.find(rel);
        return it == entries_.end() ? nullptr : &it->second;
    }
    const std::string& prefix() const { return prefix_; }
    // A TorchScript archive (torch.jit.save): its data.pkl is a tree of module objects, and it
    // holds code/ (the scripted source) and constants.pkl, neither of which is ever read here.
    bool torchscript() const {
        if (!find("constants.pkl")) return false;
        for (auto& [name, e] : entries_)
            if (name.compare(0, 5, "code/") == 0) return true;
        return false;
    }

    // Reads a whole entry; its declared size was checked against the input in the constructor.
    std::string read(const std::string& rel, uint64_t limit) {
        const Entry* e = find(rel);
        if (!e) throw FileError(what_ + ": the archive has no '" + prefix_ + rel + "'");
        if (e->size > limit)
            throw FileError(what_ + ": '" + prefix_ + rel + "' is " + std::to_string(e->size) + " bytes, over the " +
                            std::to_string(limit) + "-byte limit");
        std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> f(zip_fopen_index(z_.get(), e->index, 0), zip_fclose);
        if (!f) throw FileError(what_ + ": cannot open '" + prefix_ + rel + "': " + zip_strerror(z_.get()));
        std::string buf(size_t(e->size) + 1, '\0');  // one more: a longer entry is noticed, and EOF checks the CRC
        size_t got = 0;
        while (got < buf.size()) {
            zip_int64_t r = zip_fread(f.get(), &buf[got], buf.size() - got);
            if (r < 0) throw FileError(what_ + ": cannot read '" + prefix_ + rel + "': " + zip_file_strerror(f.get()));
            if (r == 0) break;
            got += size_t(r);
        }
        if (got != e->size)
            throw FileError(what_ + ": '" + prefix_ + rel + "' holds " + (got > e->size ? "more" : std::to_string(got)) +
                            " bytes, the zip directory says " + std::to_string(e->size));
        buf.resize(got);
        return buf;
    }

private:
    [[noreturn]] void fail_zip(const std::string& m, zip_error_t* ze) {
        std::string s = zip_error_strerror(ze);
        zip_error_fini(ze);
        throw FileError(what_ + ": " + m + " (libzip: " + s + ")");
    }
    std::string what_;
    uint64_t input_size_;
    // Owned by a member, so a throw from the constructor still closes it.
    std::unique_ptr<zip_t, void (*)(zip_t*)> z_{nullptr, zip_discard};
    std::string prefix_;
    std::unordered_map<std::string, Entry> entries_;
};

// ------------------------------------------------------------------ the unpickler

// A name from the file, fit for a message: control characters replaced, at most 200 bytes.
std::string printable(std::string s) {
    if (s.size() > 200) s = s.substr(0, 200) + "...";
    for (char& c : s) if (static_cast<unsigned char>(c) < 32 || c == 127) c = '?';
    return s;
}

class Unpickler {
public:
    // torchscript: the archive is a TorchScript one, whose data.pkl also names the scripted
    // classes (__torch__.*) and torch.jit._pickle's list builders.
    Unpickler(const std::string& bytes, Archive& ar, const std::string& what, bool torchscript)
        : p_(reinterpret_cast<const unsigned char*>(bytes.data())), n_(bytes.size()), ar_(ar), what_(what),
          torchscript_(torchscript) {}

    Val* run() {
        while (true) {
            if (pos_ >= n_) fail("the pickle ends without STOP (truncated data.pkl)");
            size_t at = pos_;
            unsigned char op = p_[pos_++];
            switch (op) {
                case 0x80: take(1); break;               // PROTO
                case 0x95: take(8); break;               // FRAME: a hint only
                case '}': push(mk(Val::Dict), at); break;    // EMPTY_DICT
                case ']': push(mk(Val::List), at); break;    // EMPTY_LIST
                case ')': push(mk(Val::Tuple), at); break;   // EMPTY_TUPLE
                case '(':                                // MARK
                    if (marks_.size() >= kMaxValues) fail_at(at, "more than " + std::to_string(kMaxValues) + " open MARKs; a state dict needs a few (refusing)");
                    charge(sizeof(size_t), "MARK stack", at);
                    marks_.push_back(stack_.size());
                    break;
                case 'X': push_str(le(4), at); break;    // BINUNICODE
                case 0x8c: push_str(le(1), at); break;   // SHORT_BINUNICODE
                case 0x8d: push_str(le(8), at); break;   // BINUNICODE8
                case 'K': push_int(int64_t(le(1)), at); break;             // BININT1
                case 'M': push_int(int64_t(le(2)), at); break;             // BININT2
                case 'J': push_int(int64_t(int32_t(uint32_t(le(4)))), at); break;  // BININT
                case 0x8a: {                             // LONG1
                    uint64_t k = le(1);
                    if (k > 8) fail("an integer of " + std::to_string(k) + " bytes (at byte " + std::to_string(at) + ") is too large");
                    uint64_t v = k ? le(k) : 0;
                    if (k && k < 8 && (v >> (8 * k - 1) & 1)) v |= ~uint64_t(0) << (8 * k);  // sign-extend
                    push_int(int64_t(v), at);
                    break;
                }
                case 'G': {                              // BINFLOAT, big-endian
                    const unsigned char* b = take(8);
                    uint64_t bits = 0;
                    for (int i = 0; i < 8; ++i) bits = bits << 8 | b[i];
                    Val* v = mk(Val::Float);
                    std::memcpy(&v->f, &bits, 8);
                    push(v, at);
                    break;
                }
                case 'N': push(mk(Val::None), at); break;
                case 0x88: case 0x89: { Val* v = mk(Val::Bool); v->i = op == 0x88; push(v, at); break; }  // NEWTRUE/FALSE
                case 0x85: case 0x86: case 0x87: {       // TUPLE1..3
                    size_t k = op - 0x84;
                    if (stack_.size() < k + floor()) fail_at(at, "TUPLE" + std::to_string(k) + " on a short stack");
                    Val* t = mk(Val::Tuple);
                    charge(k * sizeof(Val*), "tuples", at);
                    t->items.assign(stack_.end() - k, stack_.end());
                    stack_.resize(stack_.size() - k);
                    push(t, at);
                    break;
                }
                case 't': {                              // TUPLE
                    Val* t = mk(Val::Tuple);
                    size_t m = pop_mark(at);
                    charge((stack_.size() - m) * sizeof(Val*), "tuples", at);
                    t->items.assign(stack_.begin() + m, stack_.end());
                    stack_.resize(m);
                    push(t, at);
                    break;
                }
                case 's': {                              // SETITEM
                    if (stack_.size() < 3 + floor()) fail_at(at, "SETITEM on a short stack");
                    Val* v = stack_.back(); stack_.pop_back();
                    Val* k = stack_.back(); stack_.pop_back();
                    charge(2 * sizeof(Val*), "dicts", at);
                    expect(stack_.back(), Val::Dict, at, "SETITEM")->dict.emplace_back(k, v);
                    break;
                }
                case 'u': {                              // SETITEMS
                    size_t m = pop_mark(at);
                    if ((stack_.size() - m) % 2) fail_at(at, "SETITEMS with an odd number of items");
                    if (m == 0 || m <= floor()) fail_at(at, "SETITEMS without a dict");
                    Val* d = expect(stack_[m - 1], Val::Dict, at, "SETITEMS");
                    charge((stack_.size() - m) * sizeof(Val*), "dicts", at);
                    for (size_t i = m; i < stack_.size(); i += 2) d->dict.emplace_back(stack_[i], stack_[i + 1]);
                    stack_.resize(m);
                    break;
                }
                case 'a': {                              // APPEND
                    if (stack_.size() < 2 + floor()) fail_at(at, "APPEND on a short stack");
                    Val* v = stack_.back(); stack_.pop_back();
                    charge(sizeof(Val*), "lists", at);
                    expect(stack_.back(), Val::List, at, "APPEND")->items.push_back(v);
                    break;
                }
                case 'e': {                              // APPENDS
                    size_t m = pop_mark(at);
                    if (m == 0 || m <= floor()) fail_at(at, "APPENDS without a list");
                    Val* l = expect(stack_[m - 1], Val::List, at, "APPENDS");
                    charge((stack_.size() - m) * sizeof(Val*), "lists", at);
                    l->items.insert(l->items.end(), stack_.begin() + m, stack_.end());
                    stack_.resize(m);
                    break;
                }
                case 'c': {                              // GLOBAL "module\nname\n"
                    std::string mod = line(at), name = line(at);
                    push(global(mod, name), at);
                    break;
                }
                case 0x93: {                             // STACK_GLOBAL
                    Val* name = pop(at);
                    Val* mod = pop(at);
                    if (mod->kind != Val::Str || name->kind != Val::Str) fail_at(at, "STACK_GLOBAL of non-strings");
                    push(global(mod->s, name->s), at);
                    break;
                }
                case 0x81: {                             // NEWOBJ: an empty object of an allowed class
                    Val* args = pop(at);
                    Val* cls = pop(at);
                    if (cls->kind != Val::Global || cls->g != G::ClassTag)
                        fail_at(at, "NEWOBJ of " + (cls->kind == Val::Global ? "'" + printable(cls->s) + "'"
                                                                             : std::string("a ") + kind_name(cls->kind)) +
                                        ", which is not a class a checkpoint's data holds");
                    if (args->kind != Val::Tuple || !args->items.empty())
                        fail_at(at, "NEWOBJ of " + printable(cls->s) + " with arguments (an object here is only ever filled by BUILD)");
                    Val* o = mk(Val::Object);
                    o->s = cls->s;
                    push(o, at);
                    break;
                }
                case 'R': {                              // REDUCE
                    Val* args = pop(at);
                    Val* fn = pop(at);
                    push(reduce(fn, args, at), at);
                    break;
                }
                case 'b': {                              // BUILD: an object's attributes; the OrderedDict's _metadata and a parameter's state (ignored)
                    Val* state = pop(at);
                    if (stack_.size() <= floor()) fail_at(at, "BUILD on an empty stack");
                    Val* obj = stack_.back();
                    if (obj->kind == Val::Object) {  // the attributes as a dict: set, never a __setstate__ call
                        if (state->kind != Val::Dict)
                            fail_at(at, "BUILD of a " + printable(obj->s) + " object from a " + kind_name(state->kind) +
                                            ", not a dict of attributes");
                        obj->dict.insert(obj->dict.end(), state->dict.begin(), state->dict.end());
                        break;
                    }
                    if (obj->kind != Val::Dict && obj->kind != Val::Tensor)
                        fail_at(at, std::string("BUILD on a ") + kind_name(obj->kind) + ", which a state dict never needs");
                    break;
                }
                case 'q': memo_put(le(1), at); break;   // BINPUT
                case 'r': memo_put(le(4), at); break;   // LONG_BINPUT
                case 0x94: memo_put(memo_.size(), at); break;  // MEMOIZE
                case 'h': push(memo_get(le(1), at), at); break;    // BINGET
                case 'j': push(memo_get(le(4), at), at); break;    // LONG_BINGET
                case 'Q': push(persistent(pop(at), at), at); break;  // BINPERSID
                case '.': {                              // STOP
                    if (stack_.size() != 1 || !marks_.empty()) fail_at(at, "STOP with " + std::to_string(stack_.size()) + " values on the stack");
                    return stack_.back();
                }
                default: {
                    char hex[8];
                    std::snprintf(hex, sizeof hex, "0x%02x", op);
                    fail_at(at, std::string("opcode ") + hex + (op >= 32 && op < 127 ? std::string(" ('") + char(op) + "')" : "") +
                                " is not one torch.save writes for a state dict");
                }
            }
        }
    }

private:
    [[noreturn]] void fail(const std::string& m) { throw FileError(what_ + ": " + ar_.prefix() + "data.pkl: " + m); }
    [[noreturn]] void fail_at(size_t at, const std::string& m) { fail(m + " (at byte " + std::to_string(at) + ")"); }

    Val* mk(Val::Kind k) {
        if (arena_.size() >= kMaxValues)
            fail("more than " + std::to_string(kMaxValues) + " pickled values; a state dict needs far fewer (refusing)");
        charge(sizeof(Val) + 2 * sizeof(void*), "values", pos_);
        arena_.emplace_back();
        arena_.back().kind = k;
        return &arena_.back();
    }
    // Every byte the unpickler keeps is counted before it is kept: values, the
    // stack (each push: BINGET can push one memoized value millions of times),
    // marks, memo entries, container items, strings and tensor views. `part`
    // names what grew past the budget.
    void charge(uint64_t bytes, const char* part, size_t at) {
        if (bytes > kBudget - spent_)
            fail_at(at, "the pickle's " + std::string(part) + " would take the unpickler past its " +
                            std::to_string(kBudget >> 20) + " MB memory budget (" + std::to_string(arena_.size()) +
                            " values, " + std::to_string(memo_.size()) + " memo entries, stack depth " +
                            std::to_string(stack_.size()) + ", " + std::to_string(marks_.size()) +
                            " open MARKs); a state dict needs a few MB (refusing)");
        spent_ += bytes;
    }
    void push(Val* v, size_t at) {
        if (stack_.size() >= kMaxValues)
            fail_at(at, "the stack grows past " + std::to_string(kMaxValues) + " values; a state dict needs a few (refusing)");
        charge(sizeof(Val*), "stack", at);
        stack_.push_back(v);
    }
    size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
    Val* pop(size_t at) {
        if (stack_.size() <= floor()) fail_at(at, "a value is missing from the stack");
        Val* v = stack_.back();
        stack_.pop_back();
        return v;
    }
    size_t pop_mark(size_t at) {
        if (marks_.empty()) fail_at(at, "no MARK to close");
        size_t m = marks_.back();
        marks_.pop_back();
        return m;
    }
    Val* expect(Val* v, Val::Kind k, size_t at, const char* op) {
        if (v->kind != k) fail_at(at, std::string(op) + " on a " + kind_name(v->kind) + ", not a " + kind_name(k));
        return v;
    }
    const unsigned char* take(uint64_t k) {
        if (k > n_ - pos_) fail("truncated pickle (needs " + std::to_string(k) + " bytes at byte " + std::to_string(pos_) + ")");
        const unsigned char* r = p_ + pos_;
        pos_ += size_t(k);
        return r;
    }
    uint64_t le(int k) {
        const unsigned char* b = take(uint64_t(k));
        uint64_t v = 0;
        for (int i = k - 1; i >= 0; --i) v = v << 8 | b[i];
        return v;
    }
    void push_str(uint64_t len, size_t at) {
        const unsigned char* b = take(len);
        Val* v = mk(Val::Str);
        charge(len, "strings", at);
        v->s.assign(reinterpret_cast<const char*>(b), size_t(len));
        push(v, at);
    }
    void push_int(int64_t x, size_t at) { Val* v = mk(Val::Int); v->i = x; push(v, at); }
    std::string line(size_t at) {
        size_t e = pos_;
        while (e < n_ && e - pos_ < 256 && p_[e] != '\n') ++e;
        if (e >= n_ || p_[e] != '\n') fail_at(at, "GLOBAL name is unterminated or longer than 256 bytes");
        std::string s(reinterpret_cast<const char*>(p_ + pos_), e - pos_);
        pos_ = e + 1;
        return s;
    }
    void memo_put(uint64_t idx, size_t at) {
        if (stack_.empty()) fail_at(at, "memoizing from an empty stack");
        auto it = memo_.find(idx);
        if (it != memo_.end()) { it->second = stack_.back(); return; }
        if (memo_.size() >= kMaxValues)
            fail_at(at, "more than " + std::to_string(kMaxValues) + " memo entries (MEMOIZE / BINPUT); a state dict "
                        "needs one per value, a few thousand (refusing)");
        charge(kMemoEntryBytes, "memo", at);
        memo_.emplace(idx, stack_.back());
    }
    Val* memo_get(uint64_t idx, size_t at) {
        auto it = memo_.find(idx);
        if (it == memo_.end()) fail_at(at, "memo entry " + std::to_string(idx) + " was never stored");
        return it->second;
    }

    // The allow-list. Everything else is refused by name, before anything could use it.
    Val* global(const std::string& mod, const std::string& name) {
        Val* v = mk(Val::Global);
        v->s = mod + "." + name;
        if (mod == "collections" && name == "OrderedDict") v->g = G::OrderedDict;
        else if (mod == "torch._utils" && name == "_rebuild_tensor_v2") v->g = G::RebuildTensorV2;
        else if (mod == "torch._utils" && name == "_rebuild_parameter") v->g = G::RebuildParameter;
        else if (mod == "torch._utils" && name == "_rebuild_parameter_with_state") v->g = G::RebuildParameterWithState;
        else if ((mod == "torch" || mod == "torch.storage") && name == "UntypedStorage") { v->g = G::UntypedStorage; v->dt = DT::U8; }
        else if (mod == "argparse" && name == "Namespace") v->g = G::ClassTag;  // DINO's full checkpoints keep their args
        else if (torchscript_ && (mod == "__torch__" || mod.compare(0, 10, "__torch__.") == 0)) v->g = G::ClassTag;
        else if (torchscript_ && mod == "torch.jit._pickle" &&
                 (name == "build_intlist" || name == "build_doublelist" || name == "build_boollist" ||
                  name == "build_tensorlist" || name == "restore_type_tag"))
            v->g = G::JitList;
        else {
            if (mod == "torch")
                for (auto& d : kDTypes) {
                    if (name == d.storage) { v->g = G::Storage; v->dt = d.dt; return v; }
                    if (name == d.dtype) { v->g = G::DType; v->dt = d.dt; return v; }
                }
            fail("refusing the global '" + printable(v->s) + "': a torch.save state dict needs only collections.OrderedDict, "
                 "torch._utils._rebuild_tensor_v2 / _rebuild_parameter and torch storage types" +
                 std::string(torchscript_ ? " (a TorchScript archive also its __torch__ classes and torch.jit._pickle's "
                                            "list builders)" : "") +
                 ", and this reader never calls anything else (a pickle can run code)");
        }
        return v;
    }

    static bool int_of(const Val* v, uint64_t& out) {
        if (v->kind != Val::Int || v->i < 0) return false;
        out = uint64_t(v->i);
        return true;
    }

    Val* reduce(Val* fn, Val* args, size_t at) {
        if (fn->kind != Val::Global) fail_at(at, std::string("REDUCE calls a ") + kind_name(fn->kind) + ", not an allowed global");
        if (args->kind != Val::Tuple) fail_at(at, "REDUCE of " + fn->s + " without an argument tuple");
        auto& a = args->items;
        switch (fn->g) {
            case G::OrderedDict:
                if (!a.empty()) fail_at(at, "collections.OrderedDict called with arguments");
                return mk(Val::Dict);
            case G::RebuildTensorV2: {
                // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
                if (a.size() < 6 || a.size() > 7) fail_at(at, "_rebuild_tensor_v2 with " + std::to_string(a.size()) + " arguments");
                if (a[0]->kind != Val::Storage) fail_at(at, "_rebuild_tensor_v2 of a " + std::string(kind_name(a[0]->kind)) + ", not a storage");
                Val* t = mk(Val::Tensor);
                if (a[2]->kind == Val::Tuple) charge(sizeof(Val::View) + 2 * sizeof(uint64_t) * a[2]->items.size(), "tensor views", at);
                views_.emplace_back();
                t->view = &views_.back();
                t->storage = a[0];
                t->dt = a[0]->dt;
                if (!int_of(a[1], t->offset)) fail_at(at, "tensor storage offset is not a non-negative integer");
                if (a[2]->kind != Val::Tuple || a[3]->kind != Val::Tuple || a[2]->items.size() != a[3]->items.size())
                    fail_at(at, "tensor size and stride are not tuples of the same length");
                if (a[2]->items.size() > 64) fail_at(at, "tensor has more than 64 dimensions");
                for (size_t i = 0; i < a[2]->items.size(); ++i) {
                    uint64_t s, st;
                    if (!int_of(a[2]->items[i], s) || !int_of(a[3]->items[i], st))
                        fail_at(at, "tensor size or stride is not a non-negative integer");
                    t->view->shape.push_back(s);
                    t->view->stride.push_back(st);
                }
                return t;
            }
            case G::JitList:  // build_intlist(list) and friends, restore_type_tag(value, type): the value itself
                if (fn->s == "torch.jit._pickle.restore_type_tag" ? a.size() != 2 : (a.size() != 1 || a[0]->kind != Val::List))
                    fail_at(at, fn->s + " with unexpected arguments");
                return a[0];
            case G::RebuildParameter:
            case G::RebuildParameterWithState:
                if (a.size() != (fn->g == G::RebuildParameter ? 3u : 4u) || a[0]->kind != Val::Tensor)
                    fail_at(at, fn->s + " with unexpected arguments");
                return a[0];
            default:
                fail_at(at, "REDUCE calls " + fn->s + ", which is not callable here");
        }
    }

    // ('storage', torch.<Type>Storage, key, location, numel)
    Val* persistent(Val* pid, size_t at) {
        if (pid->kind != Val::Tuple || pid->items.size() != 5 || pid->items[0]->kind != Val::Str || pid->items[0]->s != "storage")
            fail_at(at, "a persistent id that is not ('storage', type, key, location, numel)");
        auto& a = pid->items;
        if (a[1]->kind != Val::Global || (a[1]->g != G::Storage && a[1]->g != G::UntypedStorage))
            fail_at(at, "persistent storage type is not a torch storage type");
        if (a[2]->kind != Val::Str) fail_at(at, "storage key is not a string");
        uint64_t numel;
        if (!int_of(a[4], numel)) fail_at(at, "storage size is not a non-negative integer");
        Val* s = mk(Val::Storage);
        charge(a[2]->s.size(), "storage keys", at);  // a memoized id can be persisted again and again
        s->dt = a[1]->dt;
        s->s = a[2]->s;
        s->numel = numel;
        const Entry* e = ar_.find("data/" + s->s);
        if (!e) fail_at(at, "storage '" + s->s + "' is missing from the archive (no " + ar_.prefix() + "data/" + s->s + ")");
        // One storage is one dtype: torch.save refuses to write views of the same data as
        // different types, and torch.load would read every view with the first type it meets.
        auto seen = storage_dtypes_.emplace(s->s, s->dt);
        if (!seen.second && seen.first->second != s->dt)
            fail_at(at, "storage '" + printable(s->s) + "' is named as " + info(seen.first->second).storage + " and as " +
                            info(s->dt).storage + " (one storage has one dtype; torch.save never writes this)");
        if (seen.second) charge(kMemoEntryBytes + s->s.size(), "storage keys", at);
        size_t es = info(s->dt).size;
        if (numel > e->size / es || numel * es != e->size)
            fail_at(at, "storage '" + s->s + "' should hold " + std::to_string(numel) + " x " + std::to_string(es) +
                            " bytes but its file holds " + std::to_string(e->size));
        return s;
    }

    // Values, memo entries, stack depth and open MARKs, each; ViT-H's pickle has ~6,000 values.
    static constexpr size_t kMaxValues = 1000000;
    static constexpr uint64_t kBudget = uint64_t(128) << 20;  // all that the unpickler keeps, in bytes
    static constexpr uint64_t kMemoEntryBytes = 64;           // an unordered_map node and its bucket
    uint64_t spent_ = 0;
    const unsigned char* p_;
    size_t n_, pos_ = 0;
    Archive& ar_;
    std::string what_;
    bool torchscript_;
    std::deque<Val> arena_;  // owns every value; the graph holds plain pointers (no cycles to leak)
    std::deque<Val::View> views_;  // at most one per value
    std::vector<Val*> stack_;
    std::vector<size_t> marks_;
    std::unordered_map<uint64_t, Val*> memo_;
    std::unordered_map<std::string, DT> storage_dtypes_;  // the dtype each storage key was first named with
};

bool has_tensor(const Val* d) {
    for (auto& [k, v] : d->dict) if (k->kind == Val::Str && v->kind == Val::Tensor) return true;
    return false;
}

// The state dict: the top-level dict, or one (up to two levels) under a usual wrapper key
// ("teacher": DINO's full checkpoints, whose own loader evaluates the teacher). `path` gets the
// wrapper keys taken ("teacher", "model"; "" for the top level).
const Val* find_state_dict(const Val* top, const std::string& what, std::string& path) {
    static const char* wrappers[] = {"model", "state_dict", "module", "model_state_dict", "state_dict_ema", "model_ema",
                                     "teacher"};
    if (top->kind == Val::Tensor) throw FileError(what + ": holds a single tensor, not a state dict");
    if (top->kind != Val::Dict) throw FileError(what + std::string(": holds a ") + kind_name(top->kind) + ", not a state dict");
    const Val* d = top;
    for (int depth = 0; depth < 3; ++depth) {
        // A wrapper key first: a real state dict never maps "model" to a dict.
        const Val* next = nullptr;
        const char* took = nullptr;
        for (const char* w : wrappers) {
            for (auto& [k, v] : d->dict)
                if (k->kind == Val::Str && k->s == w && v->kind == Val::Dict) { next = v; took = w; break; }
            if (next) break;
        }
        if (!next) {
            if (has_tensor(d)) return d;
            break;
        }
        path += (path.empty() ? "" : ".") + std::string(took);
        d = next;
    }
    std::string keys;
    int i = 0;
    for (auto& [k, v] : top->dict) {
        if (i++ == 8) { keys += ", ..."; break; }
        keys += (keys.empty() ? "" : ", ") + (k->kind == Val::Str ? "'" + k->s + "'" : std::string(kind_name(k->kind)));
    }
    throw FileError(what + ": no tensors found; the saved dict has the keys [" + keys +
                    "] and none of 'model', 'state_dict', 'module', 'teacher' holds a state dict");
}

// A TorchScript archive's module tree as its state dict: every tensor attribute under its dotted
// path ("visual.transformer.resblocks.0.attn.in_proj_weight"), as module.state_dict() names it.
// Submodules are objects; other attributes (flags, sizes, None) are skipped. The memo can make a
// tree refer back to itself or share a subtree many times over (one shared twice at each of 60
// levels is 2^60 paths): bounded in depth, in tensors and in attributes visited along the way.
void flatten_module(const Val* obj, const std::string& prefix, std::vector<const Val*>& path,
                    std::map<std::string, const Val*>& out, const std::string& what, uint64_t& visited) {
    if (path.size() > 64) throw FileError(what + ": the TorchScript module tree is more than 64 levels deep at '" + prefix + "'");
    constexpr uint64_t kMaxVisited = 1000000;  // CLIP ViT-L/14's tree has a few thousand attributes
    if (obj->dict.size() > kMaxVisited - visited)
        throw FileError(what + ": the TorchScript module tree has more than " + std::to_string(kMaxVisited) +
                        " attributes when walked (at '" + prefix + "': submodules shared over and over; refusing)");
    visited += obj->dict.size();
    path.push_back(obj);
    for (auto& [k, v] : obj->dict) {
        if (k->kind != Val::Str) continue;
        if (k->s.empty() || k->s.size() > 256 || k->s.find('.') != std::string::npos)
            throw FileError(what + ": the TorchScript module '" + prefix + "' has an attribute name that is not a plain name");
        const std::string name = prefix + k->s;
        if (v->kind == Val::Tensor) {
            if (out.size() >= 100000) throw FileError(what + ": the TorchScript module tree holds over 100,000 tensors (refusing)");
            out[name] = v;
        } else if (v->kind == Val::Object) {
            for (const Val* p : path)
                if (p == v) throw FileError(what + ": the TorchScript module '" + name + "' contains itself");
            flatten_module(v, name + ".", path, out, what, visited);
        }
    }
    path.pop_back();
}

// What the pickle holds: the tensors of the state dict by name, and where they were found.
struct Found {
    std::map<std::string, const Val*> chosen;
    bool all_module = false;                       // every key has a "module." prefix (DataParallel)
    std::map<std::string, std::string> metadata;   // pth.state_dict (the wrapper keys), pth.torchscript (the class)
};

}  // namespace

bool looks_like_zip(const char* b, size_t n) {
    return n >= 4 && b[0] == 'P' && b[1] == 'K' && ((b[2] == 3 && b[3] == 4) || (b[2] == 5 && b[3] == 6));
}

SafeTensors parse_pth(const std::string& bytes, const std::string& what) {
    return parse_pth(bytes.data(), bytes.size(), what);
}

namespace {
// Opens the archive, unpickles data.pkl and finds the state dict (or a TorchScript archive's
// module tree); then f(archive, what was found, byte budget).
template <class F>
auto with_state_dict(const char* bytes, size_t size, const std::string& what, F&& f) {
    static const unsigned char legacy_magic[] = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
    if (size >= 2 && uint8_t(bytes[0]) == 0x80 && uint8_t(bytes[1]) <= 5) {
        if (size >= 2 + sizeof legacy_magic && std::memcmp(bytes + 2, legacy_magic, sizeof legacy_magic) == 0)
            throw FileError(what + ": a legacy (pre-1.6) torch.save file, which this reader does not open; re-save it with a "
                                   "current torch: torch.save(torch.load(f), g, _use_new_zipfile_serialization=True)");
        throw FileError(what + ": a bare pickle, not a torch.save zip checkpoint; refusing to unpickle it");
    }
    if (!looks_like_zip(bytes, size))
        throw FileError(what + ": not a torch.save checkpoint (" + (size < 4 ? "only " + std::to_string(size) + " bytes" :
                                                                    std::string("no zip signature")) + ")");
    Archive ar(bytes, size, what);
    // Output budget: real checkpoints need at most 2x their size (f16 -> f32) plus tied
    // weights; views of one storage must not multiply into unbounded memory.
    const uint64_t budget = 16 * uint64_t(size) + (uint64_t(64) << 20);
    if (ar.find("byteorder")) {  // newer torch notes the byte order; every storage here is little-endian
        std::string bo = ar.read("byteorder", 16);
        if (bo != "little")
            throw FileError(what + ": " + ar.prefix() + "byteorder says '" + bo.substr(0, 8) +
                            "'; only little-endian checkpoints are supported");
    }
    std::string pkl = ar.read("data.pkl", std::min<uint64_t>(budget, uint64_t(64) << 20));
    const bool torchscript = ar.torchscript();
    Unpickler up(pkl, ar, what, torchscript);
    const Val* top = up.run();
    Found found;
    if (top->kind == Val::Object) {
        if (!torchscript)
            throw FileError(what + ": holds an object of class '" + printable(top->s) + "', not a state dict");
        std::vector<const Val*> path;
        uint64_t visited = 0;
        flatten_module(top, "", path, found.chosen, what, visited);
        if (found.chosen.empty())
            throw FileError(what + ": a TorchScript archive whose module '" + printable(top->s) + "' holds no tensors");
        found.metadata["pth.torchscript"] = printable(top->s);
    } else {
        std::string wrapper;
        const Val* sd = find_state_dict(top, what, wrapper);
        if (!wrapper.empty()) found.metadata["pth.state_dict"] = wrapper;
        // Which entries, which name: the later of two equal keys wins, as in Python.
        for (auto& [k, v] : sd->dict)
            if (k->kind == Val::Str && v->kind == Val::Tensor) found.chosen[k->s] = v;
            else if (k->kind == Val::Str) found.chosen.erase(k->s);
        found.all_module = !found.chosen.empty();
        for (auto& [k, v] : found.chosen) found.all_module &= k.compare(0, 7, "module.") == 0 && k.size() > 7;
    }
    return f(ar, found, budget);
}
}  // namespace

namespace {
// The mapped file's pages that reading has touched, handed back to the kernel (they stay in the page cache; a
// later read faults them in again): the storages are read through libzip, which does not say where an entry
// lies, so the whole mapping is released every 32 MB read. Without it a .pth held its weights twice at the
// peak, as its touched pages and as floats (ViT-B/16 from a torchvision .pth: 722 MB against 393 MB).
void release_mapping(const char* bytes, size_t size) {
    const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
    const uintptr_t p0 = uintptr_t(bytes) & ~(page - 1), p1 = uintptr_t(bytes) + size;
    ::madvise(reinterpret_cast<void*>(p0), size_t(p1 - p0), MADV_DONTNEED);
}
SafeTensors parse_pth_impl(const char* bytes, size_t size, const std::string& what, bool mapped);
}  // namespace

SafeTensors parse_pth(const char* bytes, size_t size, const std::string& what) {
    return parse_pth_impl(bytes, size, what, false);
}

namespace {
SafeTensors parse_pth_impl(const char* bytes, size_t size, const std::string& what, bool mapped) {
    return with_state_dict(bytes, size, what, [&](Archive& ar, const Found& found, uint64_t budget) {
        const std::map<std::string, const Val*>& chosen = found.chosen;
        const bool all_module = found.all_module;
        SafeTensors out;
        out.metadata = found.metadata;
        out.metadata["format"] = "pt";
        // Group by storage so each storage file is read once and dropped before the next.
        std::vector<std::pair<std::string, const Val*>> order(chosen.begin(), chosen.end());
        std::stable_sort(order.begin(), order.end(), [](auto& a, auto& b) { return a.second->storage->s < b.second->storage->s; });
        std::string cur_key, data;
        bool have = false;
        uint64_t spent = 0, read_spent = 0, since_release = 0;
        for (auto& entry : order) {
            const std::string& key = entry.first;  // not a structured binding: lambdas capture it
            const Val* t = entry.second;
            std::string name = all_module ? key.substr(7) : key;
            const Val* st = t->storage;
            auto bad = [&](const std::string& m) { throw FileError(what + ": tensor '" + key + "': " + m); };
            const DTInfo& di = info(t->dt);
            out.dtypes[name] = di.st_name;
            // Bounds: the last element addressed must lie inside the storage.
            uint64_t count = 1, last = t->offset;
            bool empty = false;
            for (size_t i = 0; i < t->view->shape.size(); ++i) {
                uint64_t s = t->view->shape[i];
                if (s == 0) empty = true;
                if (s && count > UINT64_MAX / s) bad("shape overflows");
                count *= s;
            }
            if (!empty) {
                for (size_t i = 0; i < t->view->shape.size(); ++i) {
                    uint64_t s = t->view->shape[i], str = t->view->stride[i];
                    if (str && s - 1 > (UINT64_MAX - last) / str) bad("shape and strides overflow");
                    last += (s - 1) * str;
                }
                if (last >= st->numel)
                    bad("shape " + shape_str(Shape(t->view->shape.begin(), t->view->shape.end())) + " with storage offset " +
                        std::to_string(t->offset) + " reaches element " + std::to_string(last) + " of storage '" + st->s +
                        "', which holds " + std::to_string(st->numel));
            } else if (t->offset > st->numel) {
                bad("storage offset " + std::to_string(t->offset) + " is past the end of storage '" + st->s + "'");
            }
            if (!is_float(t->dt)) continue;  // kept in dtypes, not converted (as read_safetensors does)
            if (count > (budget - spent) / 4)
                throw FileError(what + ": the tensors would need more than " + std::to_string(budget >> 20) +
                                " MB, far more than the file's size: views of shared storages multiplied (refusing)");
            spent += 4 * count;
            if (!have || st->s != cur_key) {
                data.clear();
                data.shrink_to_fit();
                if (read_spent + ar.find("data/" + st->s)->size > budget)
                    throw FileError(what + ": the storages would need more than " + std::to_string(budget >> 20) +
                                    " MB decompressed, far more than the file's size (refusing)");
                data = ar.read("data/" + st->s, budget);
                read_spent += data.size();
                since_release += data.size();
                if (mapped && since_release >= (uint64_t(32) << 20)) {  // (only a file's mapping: never heap bytes)
                    release_mapping(bytes, size);
                    since_release = 0;
                }
                cur_key = st->s;
                have = true;
            }
            Shape shape(t->view->shape.begin(), t->view->shape.end());
            Array dst = make_tensor(shape);
            float* o = dst.data();
            const unsigned char* base = reinterpret_cast<const unsigned char*>(data.data());
            const size_t es = di.size;
            // Walk the view in row-major order (non-contiguous strides are copied out).
            const size_t nd = shape.size();
            bool contiguous = true;
            for (size_t i = nd, expect = 1; i-- > 0;) {
                if (shape[i] != 1 && t->view->stride[i] != expect) contiguous = false;
                expect *= shape[i];
            }
            if (!empty && (contiguous || nd == 0)) {
                const unsigned char* src = base + t->offset * es;
                for (uint64_t i = 0; i < count; ++i) o[i] = load_float(t->dt, src + i * es);
            } else if (!empty) {
                std::vector<uint64_t> idx(nd, 0);
                uint64_t off = t->offset;
                for (uint64_t i = 0; i < count; ++i) {
                    o[i] = load_float(t->dt, base + off * es);
                    for (size_t d = nd; d-- > 0;) {  // odometer; amortised O(1) per element
                        if (++idx[d] < shape[d]) { off += t->view->stride[d]; break; }
                        off -= (shape[d] - 1) * t->view->stride[d];
                        idx[d] = 0;
                    }
                }
            }
            out.tensors.insert_or_assign(name, std::move(dst));
        }
        if (mapped) release_mapping(bytes, size);
        return out;
    });
}
}  // namespace

SafeTensors read_pth(const std::string& path) {
    return parse_mapped(path, [&](const char* b, size_t n) { return parse_pth_impl(b, n, path, n != 0); });
}

}  // namespace vit

namespace vit {

TensorIndex index_pth(const std::string& path) {
    TensorIndex ix;
    // Mapped, and only the zip directory and data.pkl are read: the storages' pages are never touched.
    parse_mapped(path, [&](const char* b, size_t n) {
        with_state_dict(b, n, path, [&](Archive&, const Found& found, uint64_t) {
            ix.metadata = found.metadata;
            ix.metadata["format"] = "pt";
            for (auto& [key, t] : found.chosen)
                ix.tensors.emplace(found.all_module ? key.substr(7) : key,
                                   std::make_pair(std::string(info(t->dt).st_name),
                                                  Shape(t->view->shape.begin(), t->view->shape.end())));
            return 0;
        });
        return SafeTensors{};
    });
    return ix;
}

}  // namespace vit
