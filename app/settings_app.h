// The app's side of Settings: which file (from the command line), what a launch
// restores, what the main loop records, and the toolbar's Recent menus.
#pragma once
#include <string>

#include "settings.h"

namespace vit::app {

class Session;
struct UiState;

// --settings FILE wins; --no-settings turns them off; headless runs (screenshots,
// benchmarks, tests) leave them off unless --settings is given.
std::string settings_file(const std::string& settings_flag, bool no_settings, bool headless);

// At launch, before the model and image load: the last model and image for
// what the command line left out (a last image that no longer exists is skipped).
void restore_launch(const Settings& st, bool model_given, std::string& model, std::string& image);
// After they loaded: the remembered options and view settings; the command line's flags go on top.
void restore_view(const Settings& st, Session& s, UiState& ui);

// Every frame: notes the model, image, options and view, and saves when they
// changed (at most once a second; final=true at exit saves whatever is left).
void remember(Settings& st, const Session& s, const UiState& ui, bool final = false);

// Inside the toolbar's model / image combo: a "Recent" submenu; returns the chosen entry or "".
std::string RecentMenu(Settings* st, bool models);
// A line in the status bar when the settings file had a problem ("" draws nothing).
void DrawSettingsError(Settings* st);

}  // namespace vit::app
