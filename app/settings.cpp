#include "settings.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/io/io.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace vit::app {

namespace {

const char* kOverlays[] = {"none", "cls", "rollout", "grad", "query"};
const char* kFusions[] = {"mean", "max", "min"};
const char* kScales[] = {"tensor", "slice", "symmetric"};
const char* kPoolings[] = {"model", "cls", "mean"};  // none, Pooling::Cls, Pooling::Mean

template <size_t N>
int index_of(const char* const (&names)[N], const std::string& s) {
    for (size_t i = 0; i < N; ++i)
        if (s == names[i]) return int(i);
    return -1;
}

template <size_t N>
std::string one_of(const char* const (&names)[N]) {
    std::string r;
    for (size_t i = 0; i < N; ++i) r += (i ? ", \"" : "\"") + std::string(names[i]) + "\"";
    return r;
}

// Collects what was wrong; each reader leaves the default in place on a bad value.
// A recent file or model name as the settings file holds it: not empty, at most 4,096 bytes, one
// line, and UTF-8 that the JSON writer accepts (a Linux file name may be any bytes; the writer
// would throw on them and the reader refuses the rest).
bool storable_name(const std::string& s) {
    if (s.empty() || s.size() > 4096 || s.find('\n') != std::string::npos) return false;
    try {
        (void)json(s).dump();
    } catch (const json::type_error&) {
        return false;
    }
    return true;
}

struct Reader {
    const json& root;
    std::vector<std::string> problems;

    const json* find(const char* group, const char* key) {
        const json* obj = &root;
        if (group) {
            auto g = root.find(group);
            if (g == root.end()) return nullptr;
            if (!g->is_object()) {
                problems.push_back(std::string("\"") + group + "\" is not an object");
                return nullptr;
            }
            obj = &*g;
        }
        auto it = obj->find(key);
        return it == obj->end() ? nullptr : &*it;
    }
    std::string name(const char* group, const char* key) {
        return group ? std::string(group) + "." + key : std::string(key);
    }
    void boolean(const char* group, const char* key, bool& out) {
        const json* v = find(group, key);
        if (!v) return;
        if (v->is_boolean()) out = v->get<bool>();
        else problems.push_back(name(group, key) + " is not true or false");
    }
    void number(const char* group, const char* key, float& out, float lo, float hi, bool hi_open) {
        const json* v = find(group, key);
        if (!v) return;
        double d = v->is_number() ? v->get<double>() : -1e300;
        if (v->is_number() && d >= lo && (hi_open ? d < hi : d <= hi)) out = float(d);
        else problems.push_back(name(group, key) + " is not a number in [" + std::to_string(lo).substr(0, 3) + ", " +
                                std::to_string(hi).substr(0, 3) + (hi_open ? ")" : "]"));
    }
    template <size_t N>
    void choice(const char* group, const char* key, int& out, const char* const (&names)[N], int offset = 0) {
        const json* v = find(group, key);
        if (!v) return;
        int i = v->is_string() ? index_of(names, v->get<std::string>()) : -1;
        if (i >= 0) out = i + offset;
        else problems.push_back(name(group, key) + " is not one of " + one_of(names));
    }
    void strings(const char* key, std::vector<std::string>& out) {
        const json* v = find(nullptr, key);
        if (!v) return;
        if (!v->is_array()) { problems.push_back(std::string(key) + " is not a list"); return; }
        std::vector<std::string> r;
        for (size_t i = 0; i < v->size(); ++i) {
            const json& e = (*v)[i];
            if (!e.is_string() || !storable_name(e.get<std::string>())) {
                problems.push_back(std::string(key) + "[" + std::to_string(i) + "] is not a file name or model name");
                continue;
            }
            if (r.size() < Settings::kMaxRecent) r.push_back(e.get<std::string>());
        }
        out = r;
    }
};

// How deep the text nests, found in one linear pass without parsing (strings and
// their escapes skipped): a settings file is 3 levels deep, and a deeper one is
// refused before the parser or anything recursive sees it.
size_t nesting_depth(const std::string& t) {
    size_t depth = 0, max_depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < t.size(); ++i) {
        const char c = t[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') in_string = true;
        else if (c == '[' || c == '{') max_depth = std::max(max_depth, ++depth);
        else if ((c == ']' || c == '}') && depth) --depth;
    }
    return max_depth;
}

// The top-level members of a JSON object as (key, the value's text), in one
// linear pass over text that json::parse has already accepted: unknown members
// are kept as the text they were, never as a tree to copy or dump.
std::vector<std::pair<std::string, std::string>> top_level_members(const std::string& t) {
    std::vector<std::pair<std::string, std::string>> out;
    size_t i = 0;
    auto ws = [&] { while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) ++i; };
    auto string_end = [&](size_t at) {  // t[at] == '"'; the index after the closing quote
        for (size_t k = at + 1; k < t.size(); ++k) {
            if (t[k] == '\\') ++k;
            else if (t[k] == '"') return k + 1;
        }
        return t.size();
    };
    if (t.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;  // a UTF-8 byte order mark, which json::parse accepts
    ws();
    if (i >= t.size() || t[i] != '{') return out;
    ++i;
    while (true) {
        ws();
        if (i >= t.size() || t[i] != '"') break;  // '}' (an empty object) or the end
        const size_t k0 = i, k1 = string_end(i);
        std::string key = json::parse(t.begin() + long(k0), t.begin() + long(k1)).get<std::string>();  // a string: flat
        i = k1;
        ws();
        ++i;  // ':'
        ws();
        const size_t v0 = i;
        size_t depth = 0;
        while (i < t.size()) {
            const char c = t[i];
            if (c == '"') { i = string_end(i); continue; }
            if (c == '[' || c == '{') ++depth;
            else if (c == ']' || c == '}') { if (depth == 0) break; --depth; }
            else if (c == ',' && depth == 0) break;
            ++i;
        }
        size_t v1 = i;
        while (v1 > v0 && (t[v1 - 1] == ' ' || t[v1 - 1] == '\t' || t[v1 - 1] == '\n' || t[v1 - 1] == '\r')) --v1;
        out.emplace_back(std::move(key), t.substr(v0, v1 - v0));
        if (i < t.size() && t[i] == ',') ++i;
        else break;
    }
    return out;
}

}  // namespace

std::string Settings::default_path() {
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    // The XDG spec: a relative $XDG_CONFIG_HOME is invalid and is ignored.
    if (xdg && *xdg && fs::path(xdg).is_absolute()) return (fs::path(xdg) / "vitscope" / "settings.json").string();
    const char* home = std::getenv("HOME");
    if (home && *home) return (fs::path(home) / ".config" / "vitscope" / "settings.json").string();
    return "";
}

Settings::Settings(std::string path) : path_(std::move(path)) {}

void Settings::add_recent(std::vector<std::string>& v, const std::string& item) {
    // A name the file could not hold, or the next launch would refuse, is not remembered.
    if (!storable_name(item)) return;
    auto it = std::find(v.begin(), v.end(), item);
    if (!v.empty() && it == v.begin()) return;
    if (it != v.end()) v.erase(it);
    v.insert(v.begin(), item);
    if (v.size() > kMaxRecent) v.resize(kMaxRecent);
}

void Settings::load() {
    if (!enabled()) return;
    std::error_code ec;
    if (!fs::exists(path_, ec) && !fs::is_symlink(path_, ec)) return;  // first launch: defaults
    std::string text;
    try {
        if (!fs::is_regular_file(path_, ec)) throw std::runtime_error("not a regular file");
        text = read_file(path_, kMaxFileBytes);
    } catch (const std::exception& e) {
        std::string why = e.what();
        if (why.rfind(path_, 0) == 0) why = why.substr(path_.size() + (why.size() > path_.size() + 1 ? 2 : 0));
        error_ = "settings " + path_ + ": " + why + "; using defaults, and the file is left as it is (not written this session)";
        read_only_ = true;
        return;
    }
    parse(text);
    written_ = data_;
}

bool Settings::parse(const std::string& text) {
    json j;
    std::string problem;
    if (size_t depth = nesting_depth(text); depth > kMaxDepth) {
        problem = "nested " + std::to_string(depth) + " levels deep, not a settings file (at most " +
                  std::to_string(kMaxDepth) + ")";
    } else {
        try {
            // Bounded as well while parsing (the depth check above already holds it).
            size_t values = 0;
            json::parser_callback_t cb = [&](int d, json::parse_event_t, json&) {
                if (size_t(d) > kMaxDepth) throw std::length_error("nested too deep");
                if (++values > kMaxValues) throw std::length_error("more than " + std::to_string(kMaxValues) + " JSON values");
                return true;
            };
            j = json::parse(text, cb);
            if (!j.is_object()) problem = "not a JSON object";
        } catch (const json::parse_error& e) {
            problem = "not valid JSON (byte " + std::to_string(e.byte) + ")";
        } catch (const json::out_of_range&) {  // a number past double's range, such as 5E937
            problem = "a number out of range (past 1.8e308), not a settings file";
        } catch (const json::exception& e) {  // anything else the parser refuses: never past this reader
            problem = std::string("not valid JSON (") + e.what() + ")";
        } catch (const std::length_error& e) {
            problem = std::string("not a settings file: ") + e.what();
        }
    }
    if (!problem.empty()) {
        data_ = SettingsData{};
        extra_.clear();
        error_ = "settings " + path_ + ": " + problem +
                 "; using defaults, and the file is left as it is (not written this session): fix or delete it";
        read_only_ = true;
        return false;
    }
    SettingsData d;
    Reader r{j, {}};
    r.strings("recent_models", d.recent_models);
    r.strings("recent_images", d.recent_images);
    r.boolean("options", "affine", d.options.affine);
    r.boolean("options", "unbiased", d.options.unbiased);
    int pooling = d.options.pooling ? 1 + int(*d.options.pooling) : 0;
    r.choice("options", "pooling", pooling, kPoolings);
    if (pooling > 0) d.options.pooling = Pooling(pooling - 1);
    else d.options.pooling.reset();
    r.choice("view", "overlay", d.view.overlay, kOverlays);
    r.number("view", "opacity", d.view.opacity, 0.f, 1.f, false);
    r.choice("view", "fusion", d.view.fusion, kFusions);
    r.number("view", "discard", d.view.discard, 0.f, 1.f, true);
    r.choice("view", "scale", d.view.scale_mode, kScales);
    r.boolean("view", "learn", d.view.learn);
    data_ = d;
    // Unknown keys (a later version's) as their text; the last of a repeated key wins, as in the parse.
    extra_.clear();
    for (auto& member : top_level_members(text)) {  // (not a structured binding: the lambda captures the key)
        const std::string& k = member.first;
        if (k == "version" || k == "recent_models" || k == "recent_images" || k == "options" || k == "view") continue;
        auto same = std::find_if(extra_.begin(), extra_.end(), [&](auto& e) { return e.first == k; });
        if (same != extra_.end()) same->second = member.second;
        else extra_.push_back(member);
    }
    if (r.problems.empty()) return true;
    std::string all;
    for (auto& p : r.problems) all += (all.empty() ? "" : "; ") + p;
    error_ = "settings " + path_ + ": " + all +
             " (defaults used for those; the file is left as it is, not written this session: fix or delete it)";
    read_only_ = true;
    return false;
}

std::string Settings::serialize() const {
    json j = json::object();
    j["version"] = 1;
    j["recent_models"] = data_.recent_models;
    j["recent_images"] = data_.recent_images;
    j["options"] = {{"affine", data_.options.affine},
                    {"unbiased", data_.options.unbiased},
                    {"pooling", kPoolings[data_.options.pooling ? std::clamp(1 + int(*data_.options.pooling), 1, 2) : 0]}};
    j["view"] = {{"overlay", kOverlays[std::clamp(data_.view.overlay, 0, 4)]},
                 {"opacity", std::round(double(data_.view.opacity) * 1000) / 1000},
                 {"fusion", kFusions[std::clamp(data_.view.fusion, 0, 2)]},
                 // [0, 1): rounded, but never up to 1, which the next launch would refuse
                 {"discard", std::min(std::round(double(data_.view.discard) * 1000) / 1000, 0.999)},
                 {"scale", kScales[std::clamp(data_.view.scale_mode, 0, 2)]},
                 {"learn", data_.view.learn}};
    std::string out = j.dump(2);  // ends with "\n}"
    // The unknown keys' text as it was read, spliced in before the closing brace.
    std::string tail;
    for (auto& [k, v] : extra_) tail += ",\n  " + json(k).dump() + ": " + v;
    out.insert(out.size() - 2, tail);
    return out + "\n";
}

bool Settings::save(std::chrono::milliseconds min_interval) {
    if (!dirty()) return true;
    auto now = std::chrono::steady_clock::now();
    if (min_interval.count() > 0 && now - last_write_ < min_interval) return true;
    try {
        fs::path dir = fs::path(path_).parent_path();
        std::error_code ec;
        if (!dir.empty()) fs::create_directories(dir, ec);
        if (ec) throw std::runtime_error(path_ + ": cannot create " + dir.string() + ": " + ec.message());
        write_file_atomic(path_, serialize());
        written_ = data_;
        last_write_ = now;
        return true;
    } catch (const std::exception& e) {
        // Say it once, then stop trying (a read-only home would otherwise fail every frame).
        error_ = std::string("settings not saved: ") + e.what();
        read_only_ = true;
        return false;
    }
}

}  // namespace vit::app
