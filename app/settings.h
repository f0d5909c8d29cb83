// What the app remembers between launches: recent models and images, the
// LayerNorm/pooling options and the overlay settings, in
// $XDG_CONFIG_HOME/vitscope/settings.json (default ~/.config/vitscope/).
//
// - Writes are atomic (vit::write_file_atomic): a crash never leaves half a file.
// - A missing file means defaults, silently. A file that cannot be read or
//   parsed, or a field of the wrong type or out of range, means defaults for
//   what was bad, an error() that names the file and the field, and the file is
//   left as it is: nothing is written back this session (the user's file is
//   never replaced behind their back; fix or delete it to start afresh).
//   That holds for any text at all: nesting is checked (a linear pass) before
//   the JSON parser runs, so a file nested 500,000 levels deep is refused by
//   name instead of overflowing the stack at every launch.
// - Keys this version does not know are written back unchanged, as the text
//   they were (never copied or dumped as a tree).
// No ImGui, no GL: the app glue (restoring at launch, the Recent menus) lives
// in settings_app.cpp.
#pragma once
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/model/model.h"

namespace vit::app {

struct ViewPrefs {
    int overlay = 1;       // 0 none, 1 cls attention, 2 rollout, 3 gradient-weighted rollout, 4 query token
    float opacity = 0.65f;
    int fusion = 0;        // rollout head fusion: mean, max, min
    float discard = 0.f;   // rollout discard ratio, [0, 1)
    int scale_mode = 0;    // 0 per tensor, 1 per slice, 2 symmetric
    bool learn = true;     // Learn mode (a first launch opens in it) or the workbench
    bool operator==(const ViewPrefs& o) const {
        return overlay == o.overlay && opacity == o.opacity && fusion == o.fusion && discard == o.discard &&
               scale_mode == o.scale_mode && learn == o.learn;
    }
};

struct SettingsData {
    std::vector<std::string> recent_models, recent_images;  // most recent first
    // affine, unbiased and pooling are remembered; the deliberate-bug switches
    // (bug_*) are not: a launch never starts with a broken model.
    Options options;
    ViewPrefs view;
    bool operator==(const SettingsData& o) const {
        return recent_models == o.recent_models && recent_images == o.recent_images && options == o.options &&
               view == o.view;
    }
    bool operator!=(const SettingsData& o) const { return !(*this == o); }
};

class Settings {
public:
    static constexpr size_t kMaxRecent = 10;
    static constexpr size_t kMaxFileBytes = size_t(1) << 20;
    static constexpr size_t kMaxDepth = 32;        // levels of nesting (the file uses 2)
    static constexpr size_t kMaxValues = 200'000;  // JSON values in the file

    // $XDG_CONFIG_HOME/vitscope/settings.json, else $HOME/.config/vitscope/settings.json;
    // "" when neither variable is set (settings are then off).
    static std::string default_path();

    explicit Settings(std::string path = "");  // "" = off: load and save do nothing
    bool enabled() const { return !path_.empty(); }
    const std::string& path() const { return path_; }
    // Whether save() may write (false after a bad file, for the rest of the session).
    bool writable() const { return enabled() && !read_only_; }

    void load();
    // Parses a file's text (load() uses it; tests call it directly). Returns
    // false and sets error() if anything was ignored.
    bool parse(const std::string& text);
    std::string serialize() const;

    const SettingsData& data() const { return data_; }
    SettingsData& data() { return data_; }
    void add_recent_model(const std::string& spec) { add_recent(data_.recent_models, spec); }
    void add_recent_image(const std::string& path) { add_recent(data_.recent_images, path); }

    // Writes the file if enabled, writable and changed since the last write.
    // min_interval: skip (return true) if the last write was more recent (a
    // slider being dragged changes the prefs every frame). Errors go to error().
    bool save(std::chrono::milliseconds min_interval = std::chrono::milliseconds(0));
    bool dirty() const { return writable() && data_ != written_; }

    const std::string& error() const { return error_; }
    void clear_error() { error_.clear(); }

private:
    static void add_recent(std::vector<std::string>& v, const std::string& item);
    std::string path_, error_;
    bool read_only_ = false;
    SettingsData data_, written_;
    std::vector<std::pair<std::string, std::string>> extra_;  // unknown keys and their values' JSON text
    std::chrono::steady_clock::time_point last_write_{};
};

}  // namespace vit::app
