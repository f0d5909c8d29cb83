#include "paths.h"

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace vit::app {

namespace {

bool is_dir(const fs::path& p) {
    std::error_code ec;
    return fs::is_directory(p, ec);
}

DataPaths from_root(const fs::path& root, const fs::path& shaders, const char* how) {
    DataPaths d;
    d.root = root.string();
    d.samples = (root / "samples").string();
    d.classes = (root / "classes").string();
    d.shaders = shaders.string();
    d.default_model = (root / "fmnist_vit.safetensors").string();
    d.how = how;
    return d;
}

}  // namespace

DataPaths data_paths_for(const std::string& exe_path) {
    std::error_code ec;
    fs::path exe = fs::weakly_canonical(fs::path(exe_path), ec);
    if (ec) exe = fs::path(exe_path);
    const fs::path bin = exe.parent_path();
    // Installed: <prefix>/bin/vitscope -> <prefix>/share/vitscope
    const fs::path share = bin.parent_path() / "share" / "vitscope";
    if (is_dir(share / "samples")) return from_root(share, share / "shaders", "installed");
    // Build directory: CMake leaves the source tree's location next to the executable.
    std::ifstream marker(bin / "vitscope-source-dir");
    std::string src;
    if (marker && std::getline(marker, src) && !src.empty() && is_dir(fs::path(src) / "assets" / "samples"))
        return from_root(fs::path(src) / "assets", fs::path(src) / "shaders", "source tree");
    DataPaths none;
    none.how = "none";
    return none;
}

DataPaths data_paths() {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? DataPaths{"", "", "", "", "", "none"} : data_paths_for(exe.string());
}

std::string default_sample_image(const std::string& model) {
    const DataPaths d = data_paths();
    if (d.samples.empty()) return "";
    // the scenes model opens on a bundled test scene (its box in labels.json beside it), the others on the boot
    fs::path p = fs::path(d.samples) / (model == "scenes" ? "scenes/00003.png" : "9_ankle_boot_test0.png");
    std::error_code ec;
    return fs::exists(p, ec) ? p.string() : "";
}

}  // namespace vit::app
