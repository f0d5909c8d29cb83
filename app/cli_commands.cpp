#include "cli_commands.h"

#include <cstdio>
#include <iostream>

#include "../core/checkpoint.h"
#include "../core/forward.h"
#include "../core/image.h"
#include "../core/io.h"

namespace vit::cli {

struct Commands::State {
    std::string model = "default", image, input, out;
    int heads = 0;
    bool no_affine = false, unbiased = false;
    std::string pooling;
    uint64_t seed = 0;
};

namespace {

LoadOverrides overrides(const Commands::State& s) {
    LoadOverrides ov;
    ov.heads = s.heads;
    if (s.pooling == "cls") ov.pooling = int(Pooling::Cls);
    if (s.pooling == "mean") ov.pooling = int(Pooling::Mean);
    return ov;
}

void model_flags(CLI::App* c, Commands::State& s) {
    c->add_option("--model,-m", s.model, "'default' (embedded Fashion-MNIST model), a preset (" +
                  [] { std::string a; for (auto& p : preset_names()) a += (a.empty() ? "" : ", ") + p; return a; }() +
                  ") or a .safetensors file (timm, Hugging Face or torchvision layout)")
        ->default_val("default");
    c->add_option("--heads", s.heads, "number of attention heads (when the file does not say; default width/64)")
        ->check(CLI::Range(1, 4096));
    c->add_option("--pooling", s.pooling, "override pooling: cls or mean")->check(CLI::IsMember({"cls", "mean"}));
    c->add_option("--seed", s.seed, "seed for a preset's random weights")->default_val(0);
}

}  // namespace

Commands::Commands(CLI::App& app) : s_(std::make_shared<State>()) {
    auto& s = *s_;
    auto* tr = app.add_subcommand("trace", "run one image and write every recorded stage to an .npz");
    model_flags(tr, s);
    auto* img = tr->add_option("--image,-i", s.image, "image file (PNG, JPEG, BMP, GIF, TGA, PSD, HDR, PNM)");
    auto* inp = tr->add_option("--input", s.input, "an already-normalized (C, H, W) float .npy instead of an image");
    img->excludes(inp);
    tr->add_flag("--no-affine", s.no_affine, "LayerNorm without elementwise_affine (gamma, beta ignored)");
    tr->add_flag("--unbiased", s.unbiased, "LayerNorm variance over N-1 instead of N");
    tr->add_option("--out,-o", s.out, "output .npz (numpy.load reads it)")->required();
    tr->callback([this] {
        selected_ = [this] {
            auto& s = *s_;
            if (s.image.empty() && s.input.empty()) throw CLI::ValidationError("trace needs --image or --input");
            LoadedModel lm = load_model(s.model, overrides(s), s.seed);
            const Config& c = lm.weights.cfg;
            Tensor x = s.input.empty() ? preprocess(load_image(s.image), c) : read_npy(s.input);
            Options opt;
            opt.affine = !s.no_affine;
            opt.unbiased = s.unbiased;
            Trace t = vit::run(lm.weights, x, opt);
            std::vector<std::pair<std::string, const Tensor*>> items;
            for (auto& e : t.entries()) items.emplace_back(e.name, &e.tensor);
            write_npz(s.out, items);
            const Tensor& p = t.get("probs");
            size_t best = 0;
            for (size_t i = 1; i < p.size(); ++i) if (p(i) > p(best)) best = i;
            std::printf("model: %s [%s]\n", c.describe().c_str(), lm.source.c_str());
            std::printf("wrote %zu stages (%.1f MB) to %s\n", t.size(), t.bytes() / 1e6, s.out.c_str());
            std::printf("prediction: class %zu%s%s (p=%.4f)\n", best, c.class_names.empty() ? "" : " ",
                        c.class_names.empty() ? "" : c.class_names[best].c_str(), p(best));
            return 0;
        };
    });

    auto* info = app.add_subcommand("info", "print a model's config, parameter count and per-stage shapes");
    model_flags(info, s);
    info->callback([this] {
        selected_ = [this] {
            auto& s = *s_;
            LoadedModel lm = load_model(s.model, overrides(s), s.seed);
            const Config& c = lm.weights.cfg;
            std::printf("source: %s\nfamily: %s\nconfig: %s\n", lm.source.c_str(), family_name(lm.family),
                        c.describe().c_str());
            std::printf("parameters: %lld\n", (long long)param_count(c));
            std::printf("preprocess: %s, mean", c.pre.resize ? ("resize " + std::to_string(c.pre.resize) + " + center crop").c_str() : "straight resize");
            for (float m : c.pre.mean) std::printf(" %.4g", m);
            std::printf(", std");
            for (float v : c.pre.std) std::printf(" %.4g", v);
            std::printf("\nstages:\n");
            Tensor zero = Tensor::zeros({size_t(c.channels), size_t(c.image_size), size_t(c.image_size)});
            if (c.depth <= 24 && param_count(c) < 400'000'000) {
                Trace t = vit::run(lm.weights, zero);
                for (auto& e : t.entries()) std::printf("  %-28s %s\n", e.name.c_str(), shape_str(e.tensor.shape).c_str());
            } else {
                for (auto& n : stage_names(c)) std::printf("  %s\n", n.c_str());
            }
            return 0;
        };
    });
}

int Commands::run() {
    try {
        if (!selected_) return 2;
        return selected_();
    } catch (const CLI::ValidationError& e) {
        std::cerr << "vitscope-cli: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "vitscope-cli: error: " << e.what() << "\n";
        return 1;
    }
}

}  // namespace vit::cli
