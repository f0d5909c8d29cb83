// vitscope-cli scenes: writes generated scenes (core/io/scenes.h) as PNG files with their labels and boxes,
// the same scenes the scenes model is trained and evaluated on.
#include "app/cli_scenes.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "core/io/checkpoint.h"
#include "core/io/dataset.h"
#include "core/io/image.h"
#include "core/io/io.h"
#include "core/io/scenes.h"
#include "core/model/model.h"

namespace vit::cli {

void add_scenes_command(CLI::App& app, std::function<int()>& selected) {
    struct Flags {
        std::string split = "test", out, data = default_fashion_mnist_dir();
        uint64_t seed = 1;
        int count = 16;
    };
    auto f = std::make_shared<Flags>();
    auto* sc = app.add_subcommand("scenes", "write generated scenes (a Fashion-MNIST item tinted, scaled and placed among "
                                            "distractors) as PNG files with labels.json (class and the object's box)");
    sc->add_option("--split", f->split, "the items: train (what the scenes model trains on) or test (what it is evaluated on)")
        ->check(CLI::IsMember({"train", "test"}))->default_val("test");
    sc->add_option("--seed", f->seed, "the set's seed: the same seed gives the same scenes (the evaluation uses 1)")->default_val(1);
    sc->add_option("--count", f->count, "how many scenes")->check(CLI::Range(1, 1000000))->default_val(16);
    sc->add_option("--data", f->data, "directory with the Fashion-MNIST IDX files")->default_val(default_fashion_mnist_dir());
    sc->add_option("--out,-o", f->out, "a new or empty directory to write 00000.png ... and labels.json into")->required();
    sc->callback([f, &selected] {
        selected = [f] {
            namespace fs = std::filesystem;
            std::error_code ec;
            const fs::path dir(f->out);
            if (f->out.empty()) throw UsageError("--out: give a directory to write the scenes into");
            if (fs::exists(fs::symlink_status(dir, ec))) {
                if (!fs::is_directory(dir, ec)) throw UsageError("--out " + terminal_safe(f->out) + ": exists and is not a directory");
                if (!fs::is_empty(dir, ec))
                    throw UsageError("--out " + terminal_safe(f->out) + ": the directory is not empty; scenes go into a new or empty one");
            } else if (!fs::create_directories(dir, ec) || ec) {
                throw UsageError("--out " + terminal_safe(f->out) + ": cannot create the directory: " + ec.message());
            }
            const Dataset d = load_fashion_mnist(f->data, f->split == "train");
            const Config c = preset("scenes");
            std::string labels = "[\n";
            for (int i = 0; i < f->count; ++i) {
                const SceneDraw dr = scene_draw(d, f->seed, i);
                const Scene s = make_scene(d, dr.item, dr.seed, scene_options(c));
                char name[32];
                std::snprintf(name, sizeof name, "%05d.png", i);
                write_png((dir / name).string(), s.rgb.data(), s.size, s.size, 3);
                labels += (i ? ",\n " : " ") + scene_labels_entry(s, name, c.class_names[size_t(s.label)], f->split);
                if ((i + 1) % 1000 == 0) std::fprintf(stderr, "%d/%d scenes\n", i + 1, f->count);
            }
            write_file_atomic((dir / "labels.json").string(), labels + "\n]\n");
            std::printf("wrote %d %s scenes (%dx%d, seed %llu) and labels.json to %s\n", f->count, f->split.c_str(), c.image_size,
                        c.image_size, (unsigned long long)f->seed, terminal_safe(f->out).c_str());
            return 0;
        };
    });
}

}  // namespace vit::cli
