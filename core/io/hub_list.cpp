// The models already on this computer: the Hugging Face cache and torch.hub's checkpoints,
// identified from tensor names and shapes (headers only) and the config.json beside them.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <cstdio>
#include <set>

#include "core/io/checkpoint.h"
#include "core/io/hf_config.h"
#include "core/io/hub.h"
#include "core/io/io.h"

namespace vit::hub {

namespace {

using Shapes = std::map<std::string, std::vector<size_t>>;

const std::vector<size_t>* get(const Shapes& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? nullptr : &it->second;
}
bool has(const Shapes& m, const std::string& k) { return m.count(k) != 0; }
bool any_with(const Shapes& m, const std::string& part) {
    for (auto& [k, v] : m)
        if (k.find(part) != std::string::npos) return true;
    return false;
}
bool any_starting(const Shapes& m, const std::string& prefix) {
    auto it = m.lower_bound(prefix);
    return it != m.end() && it->first.compare(0, prefix.size(), prefix) == 0;
}
// Saturating at 2^62: a hostile header's shapes must not overflow the sums below.
uint64_t numel(const std::vector<size_t>& s) {
    constexpr uint64_t cap = uint64_t(1) << 62;
    uint64_t n = 1;
    for (size_t d : s) {
        if (d == 0) return 0;
        n = n > cap / d ? cap : n * d;
    }
    return n;
}

// 1 + the largest N of "<prefix>N." keys.
int count_blocks(const Shapes& m, const std::string& prefix) {
    int n = 0;
    for (auto it = m.lower_bound(prefix); it != m.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
        size_t e = prefix.size();
        int v = 0;
        while (e < it->first.size() && std::isdigit(static_cast<unsigned char>(it->first[e])) && e - prefix.size() < 6)
            v = v * 10 + (it->first[e++] - '0');
        if (e > prefix.size()) n = std::max(n, v + 1);
    }
    return n;
}

// The published names of the standard widths and depths.
std::string size_name(size_t width, int depth) {
    struct K { size_t w; int d; const char* n; };
    static const K known[] = {{192, 12, "Ti"}, {384, 12, "S"}, {768, 12, "B"}, {1024, 24, "L"}, {1280, 32, "H"},
                              {1408, 40, "g"}, {1536, 40, "g"}, {1664, 48, "G"}, {1152, 27, "So400m"}};
    for (const K& k : known)
        if (k.w == width && k.d == depth) return k.n;
    return "";
}

// What a config.json beside the weights names (core/io/hf_config reads it): Hugging Face's
// model_type, or timm's architecture. A listing says what it can: a config that does not parse
// names nothing here (opening the model reports it).
std::pair<std::string, std::string> config_names(const std::string& text) {
    if (text.empty()) return {};
    try {
        const ConfigFile cf = parse_config_json(text, "config.json");
        if (cf.model.kind == ConfigKind::Timm)
            return {"", cf.model.architectures.empty() ? "" : cf.model.architectures[0]};
        return {cf.model.model_type.value_or(""), ""};
    } catch (const FileError&) {
        return {};
    }
}

}  // namespace

Identity identify(const Shapes& all, const std::string& config_json) {
    Identity id;
    for (auto& [k, s] : all) id.params = int64_t(std::min<uint64_t>(uint64_t(id.params) + numel(s), uint64_t(1) << 62));
    const auto [model_type, timm_arch] = config_names(config_json);

    // The patch embedding names the layout; what comes before it (module., teacher.backbone.,
    // vision_model., visual., vit., ...) is the model's root inside the file.
    struct Layout { const char* suffix; const char* kind; };
    static const Layout layouts[] = {
        {"embeddings.patch_embeddings.projection.weight", "hf"},  // ViT, DeiT, DINOv2, ViTMAE, BEiT (Hugging Face)
        {"embeddings.patch_embedding.weight", "hf-clip"},         // CLIP and SigLIP vision towers (Hugging Face)
        {"embeddings.patch_embeddings.weight", "hf-dinov3"},      // DINOv3ViTModel (Hugging Face)
        {"visual.conv1.weight", "openai-clip"},                   // OpenAI CLIP, open_clip
        {"conv_proj.weight", "torchvision"},
        {"patch_embed.proj.weight", "timm"},                      // timm, DeiT, DINO, DINOv2, MAE
    };
    std::string root, kind;
    const std::vector<size_t>* pw = nullptr;
    for (const Layout& l : layouts) {
        const std::string suf = l.suffix;
        for (auto& [k, s] : all) {
            if (k.size() < suf.size() || k.compare(k.size() - suf.size(), suf.size(), suf) != 0) continue;
            std::string r = k.substr(0, k.size() - suf.size());
            if (!r.empty() && r.back() != '.') continue;
            if (pw && r.size() >= root.size()) continue;  // the shortest root: the student of a teacher, not a sub-module
            root = r;
            kind = l.kind;
            pw = &s;
        }
        if (pw) break;
    }
    if (!pw || pw->size() != 4 || (*pw)[2] != (*pw)[3]) {
        id.vit = false;
        std::string what = !model_type.empty() ? "config.json: model_type '" + model_type + "'"
                           : !timm_arch.empty() ? "timm architecture '" + timm_arch + "'"
                           : any_with(all, "layer1.0.conv1") ? "a ResNet-style CNN"
                           : any_with(all, "word_embeddings") || any_with(all, "wte.weight") ? "a language model"
                                                                                               : "no patch embedding";
        id.family = "not a ViT (" + what + ")";
        return id;
    }
    Shapes m;  // the model under its root
    for (auto& [k, s] : all)
        if (k.compare(0, root.size(), root) == 0) m.emplace(k.substr(root.size()), s);
    const size_t D = (*pw)[0], P = (*pw)[2];
    std::string family, blocks, pos_key, head_key, note;
    int prefix_tokens = 1;  // cls
    bool head_rows = true;  // head weight is (classes, D); false: a projection (D, E)
    auto registers = [&](const char* key) -> int {
        const std::vector<size_t>* r = get(m, key);
        return r && r->size() >= 2 ? int((*r)[r->size() - 2]) : 0;
    };
    // The usual roots of each layout go unsaid; another (teacher.backbone., module.) is named.
    static const std::set<std::string> usual = {"", "vit.", "deit.", "dinov2.", "vit_mae.", "vision_model."};
    const std::string where = usual.count(root) ? "" : " under '" + root + "'";
    id.vit = true;
    if (kind == "timm") {
        blocks = "blocks.";
        pos_key = "pos_embed";
        head_key = "head.weight";
        if (any_starting(m, "layers.0.blocks.")) { family = "Swin (windowed attention, not a plain ViT)"; id.vit = false; }
        else if (any_with(m, "relative_position_bias_table") || has(m, "rel_pos_bias.relative_position_bias_table")) {
            family = "BEiT (relative position bias)";
            id.vit = false;
        } else if (!has(m, "blocks.0.attn.qkv.weight") && has(m, "blocks.0.attn.q_proj.weight")) {
            family = "EVA (rotary position embedding)";
            id.vit = false;
        } else if (has(m, "dist_token")) { family = "DeiT distilled (timm)"; prefix_tokens = 2; }
        else if (has(m, "rope_embed.periods") || has(m, "storage_tokens")) {
            // DINOv3 (torch.hub): RoPE, no position table (so no grid to tell a size)
            int r = registers("storage_tokens");
            family = "DINOv3" + (r ? " with " + std::to_string(r) + " storage tokens" : std::string()) +
                     " (facebookresearch, RoPE)";
            pos_key.clear();
        }
        else if (has(m, "blocks.0.ls1.gamma") && (has(m, "mask_token") || has(m, "register_tokens"))) {
            int r = registers("register_tokens");
            family = r ? "DINOv2 with " + std::to_string(r) + " registers (original layout)" : "DINOv2 (original layout)";
        } else if (!has(m, "cls_token") && has(m, "blocks.0.attn.qkv.weight") &&
                   (has(m, "reg_token") || has(m, "fc_norm.weight") || has(m, "norm.weight"))) {
            // timm's class_token=False ViTs: vit_*_reg4_gap_* (registers, fc_norm), vit_*_gap_* (refused on load)
            int r = registers("reg_token");
            family = r ? "ViT without a cls token, " + std::to_string(r) + " registers (timm, mean pooling)"
                       : std::string("ViT without a cls token (timm, mean pooling)");
            prefix_tokens = 0;
        } else if (has(m, "reg_token") || (timm_arch.find("dinov2") != std::string::npos)) {
            int r = registers("reg_token");
            family = r ? "DINOv2 with " + std::to_string(r) + " registers (timm)" : "DINOv2 (timm)";
            if (r) prefix_tokens = 0;  // timm's register models fold the cls position into cls_token
        } else if (has(m, "norm_pre.weight")) family = "CLIP image tower (timm)";
        else if (any_starting(all, "decoder_blocks.") || has(all, "decoder_embed.weight"))
            family = "MAE (encoder and decoder)";
        else if (has(m, "head.weight")) family = "ViT (timm)";
        else if (timm_arch.find(".mae") != std::string::npos) family = "MAE encoder (timm)";
        else if (timm_arch.find(".dino") != std::string::npos || root.find("teacher") != std::string::npos)
            family = "DINO (timm layout)";
        else family = "ViT encoder without a head (timm layout: DINO, MAE or a backbone)";
        if (!timm_arch.empty()) family += ", " + timm_arch;
    } else if (kind == "hf-dinov3") {
        blocks = "layer.";
        int r = registers("embeddings.register_tokens");
        family = "DINOv3" + (r ? " with " + std::to_string(r) + " storage tokens" : std::string()) + " (Hugging Face, RoPE)";
    } else if (kind == "torchvision") {
        blocks = "encoder.layers.encoder_layer_";
        pos_key = "encoder.pos_embedding";
        head_key = "heads.head.weight";
        family = "ViT (torchvision)";
    } else if (kind == "hf") {
        blocks = "encoder.layer.";
        pos_key = "embeddings.position_embeddings";
        head_key = "classifier.weight";
        // The head sits beside the root (ViTForImageClassification: vit.* and classifier.*).
        if (!has(m, head_key) && has(all, "classifier.weight")) m.emplace(head_key, *get(all, "classifier.weight"));
        if (any_with(m, "relative_position_bias") || model_type == "beit" || model_type == "data2vec-vision") {
            family = "BEiT (relative position bias, Hugging Face)";
            id.vit = false;
        } else if (has(m, "embeddings.distillation_token")) {
            family = "DeiT distilled (Hugging Face)";
            prefix_tokens = 2;
            if (!has(m, head_key) && has(all, "cls_classifier.weight")) m.emplace(head_key, *get(all, "cls_classifier.weight"));
        } else if (has(m, "encoder.layer.0.layer_scale1.lambda1")) {
            int r = registers("embeddings.register_tokens");
            family = r ? "DINOv2 with " + std::to_string(r) + " registers (Hugging Face)" : "DINOv2 (Hugging Face)";
        } else if (model_type == "vit_mae" || any_starting(all, "decoder.")) family = "MAE (Hugging Face ViTMAE)";
        else if (root == "deit." || model_type == "deit") family = "DeiT (Hugging Face)";
        else family = "ViT (Hugging Face)";
    } else if (kind == "hf-clip") {
        blocks = "encoder.layers.";
        pos_key = "embeddings.position_embedding.weight";
        if (has(m, "embeddings.class_embedding")) {
            family = any_starting(all, "text_model.") ? "CLIP (Hugging Face, image and text towers)" : "CLIP vision tower (Hugging Face)";
            head_key = has(all, "visual_projection.weight") ? "visual_projection.weight" : "";
            if (!head_key.empty()) m.emplace(head_key, *get(all, head_key));
        } else {
            prefix_tokens = 0;
            family = any_starting(all, "text_model.") ? "SigLIP (Hugging Face, image and text towers)" : "SigLIP vision tower (Hugging Face)";
            if (!has(m, "head.probe")) family += ", without the pooling head";
        }
    } else {  // openai-clip: root ends before "visual."
        blocks = "visual.transformer.resblocks.";
        pos_key = "visual.positional_embedding";
        head_key = "visual.proj";
        head_rows = false;
        family = any_starting(m, "transformer.resblocks.") ? "CLIP (OpenAI / open_clip, image and text towers)"
                                                           : "CLIP image tower (OpenAI / open_clip)";
    }
    // Shapes: depth, position grid, head.
    const int depth = count_blocks(m, blocks);
    const std::vector<size_t>* pos = get(m, pos_key);
    if (!pos && kind == "timm" && root.empty() && has(all, "pos_embed") && !pos_key.empty()) pos = get(all, "pos_embed");
    std::string grid;
    if (pos && D) {
        const uint64_t T = numel(*pos) / D;
        for (int k : {prefix_tokens, 1, 0, 2}) {
            if (T < uint64_t(k) + 1) continue;
            uint64_t g = uint64_t(std::llround(std::sqrt(double(T - k))));
            if (g * g == T - k) {
                grid = std::to_string(g * P) + " px";
                break;
            }
        }
    }
    std::string name = size_name(D, depth);
    id.size = !name.empty() ? "ViT-" + name + "/" + std::to_string(P)
              : depth ? "width " + std::to_string(D) + ", depth " + std::to_string(depth) + ", patch " + std::to_string(P)
                      : "width " + std::to_string(D) + ", patch " + std::to_string(P);
    if (!grid.empty()) id.size += ", " + grid;
    const std::vector<size_t>* hw = head_key.empty() ? nullptr : get(m, head_key);
    if (hw && hw->size() == 2) {
        if (kind == "hf-clip" || !head_rows) id.size += ", embedding " + std::to_string(head_rows ? (*hw)[0] : (*hw)[1]);
        else id.size += ", " + std::to_string((*hw)[0]) + " classes";
    } else if (id.vit && kind != "hf-clip") {
        id.size += ", no classification head";
    }
    id.family = family + where;
    return id;
}

namespace {

bool is_regular(const std::string& p, uint64_t* size = nullptr) {
    struct stat sb;
    if (::stat(p.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) return false;  // a snapshot's file: a link to its blob
    if (size) *size = uint64_t(sb.st_size);
    return true;
}

// A real directory: a link to one is never entered (refs/a -> . loops, refs/x -> /usr walks the disk).
bool real_dir(const std::string& p) {
    struct stat sb;
    return ::lstat(p.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode);
}

// The bounds of one scan, and how it went.
struct Walk {
    ScanLimits lim;
    std::function<bool(const ScanProgress&)> progress;
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    size_t entries = 0;
    std::string stopped;
    bool over() {
        if (!stopped.empty()) return true;
        if (entries > lim.max_entries)
            stopped = "stopped after reading " + std::to_string(lim.max_entries) + " names (the limit of one scan)";
        else if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > lim.max_seconds)
            stopped = "stopped after " + std::to_string(int(lim.max_seconds)) + " s (the limit of one scan)";
        return !stopped.empty();
    }
    bool step(size_t done, size_t total, const std::string& what) {
        if (over()) return false;
        if (progress && !progress(ScanProgress{done, total, what})) {
            stopped = "cancelled";
            return false;
        }
        return true;
    }
    // The names in `dir`, sorted; at most max_per_folder of them (a note says when more were there).
    std::vector<std::string> list(const std::string& dir) {
        std::vector<std::string> v;
        if (over()) return v;
        if (DIR* d = ::opendir(dir.c_str())) {
            while (dirent* e = ::readdir(d)) {
                std::string n = e->d_name;
                if (n == "." || n == "..") continue;
                if (v.size() >= lim.max_per_folder || ++entries > lim.max_entries) {
                    if (stopped.empty())
                        stopped = v.size() >= lim.max_per_folder
                                      ? terminal_safe(dir) + " holds more than " + std::to_string(lim.max_per_folder) +
                                            " names; the rest were not read"
                                      : "stopped after reading " + std::to_string(lim.max_entries) + " names (the limit of one scan)";
                    break;
                }
                v.push_back(n);
            }
            ::closedir(d);
        }
        std::sort(v.begin(), v.end());
        return v;
    }
};

bool weights_name(const std::string& n) {
    auto ends = [&](const char* e) {
        std::string s = e;
        return n.size() > s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
    };
    return ends(".safetensors") || ends(".pth") || ends(".pt") || ends(".bin") || ends(".ckpt");
}

Found examine(const std::string& path, const std::string& config_path) {
    Found f;
    f.path = path;
    is_regular(path, &f.bytes);
    try {
        TensorIndex ix = index_checkpoint(path);
        Shapes shapes;
        for (auto& [k, v] : ix.tensors) shapes.emplace(k, v.second);
        std::string cfg;
        if (!config_path.empty() && is_regular(config_path)) {
            try { cfg = read_file(config_path, 16 << 20); } catch (const FileError&) {}
        }
        f.id = identify(shapes, cfg);
    } catch (const std::exception& e) {
        f.id.family = "unreadable";
        f.note = e.what();
    }
    return f;
}

// refs/<name> files (nested for refs/pr/N): commit -> the ref names pointing at it. Real folders
// only, at most max_depth deep; a ref is a small regular file (read_file refuses anything else).
void read_refs(Walk& w, const std::string& dir, const std::string& prefix, int depth,
               std::map<std::string, std::vector<std::string>>& out) {
    if (depth > w.lim.max_depth) return;
    for (const std::string& n : w.list(dir)) {
        std::string p = dir + "/" + n;
        struct stat sb;
        if (::lstat(p.c_str(), &sb) != 0) continue;
        if (S_ISREG(sb.st_mode)) {
            try {
                std::string c = read_file(p, 4096);
                while (!c.empty() && std::isspace(static_cast<unsigned char>(c.back()))) c.pop_back();
                out[c].push_back(prefix + n);
            } catch (const FileError&) {
            }
        } else if (S_ISDIR(sb.st_mode)) {
            read_refs(w, p, prefix + n + "/", depth + 1, out);
        }
        if (w.over()) return;
    }
}

}  // namespace

ScanResult scan_models(const std::string& hf_cache_arg, const std::string& torch_arg, const ScanLimits& limits,
                       const std::function<bool(const ScanProgress&)>& progress) {
    Walk w;
    w.lim = limits;
    w.progress = progress;
    ScanResult res;
    std::vector<Found>& out = res.found;
    const std::string hf = hf_cache_arg.empty() ? cache_dir() : hf_cache_arg;
    const std::string th = torch_arg.empty() ? torch_checkpoints_dir() : torch_arg;
    std::vector<std::string> repos;
    for (const std::string& r : w.list(hf))
        if (r.rfind("models--", 0) == 0) repos.push_back(r);  // datasets--, spaces--, .locks
    std::vector<std::string> torch_files;
    for (const std::string& n : w.list(th))
        if (weights_name(n)) torch_files.push_back(n);
    const size_t total = repos.size() + torch_files.size();
    size_t done = 0;
    for (const std::string& repo_dir : repos) {
        if (!w.step(done++, total, repo_dir)) break;
        const std::string storage = hf + "/" + repo_dir;
        if (!real_dir(storage)) continue;
        std::string repo_id = repo_dir.substr(8);
        for (size_t p; (p = repo_id.find("--")) != std::string::npos;) repo_id.replace(p, 2, "/");
        std::map<std::string, std::vector<std::string>> refs;
        if (real_dir(storage + "/refs")) read_refs(w, storage + "/refs", "", 1, refs);
        if (!real_dir(storage + "/snapshots")) continue;
        for (const std::string& commit : w.list(storage + "/snapshots")) {
            if (w.over()) break;
            const std::string snap = storage + "/snapshots/" + commit;
            if (!real_dir(snap)) continue;
            std::string weights;
            bool standard = false;
            for (const char* wn : {"model.safetensors", "pytorch_model.bin"})
                if (weights.empty() && is_regular(snap + "/" + wn)) { weights = snap + "/" + wn; standard = true; }
            if (weights.empty())
                for (const std::string& n : w.list(snap))
                    if (weights_name(n) && is_regular(snap + "/" + n)) { weights = snap + "/" + n; break; }
            if (weights.empty()) continue;  // only configs cached: nothing to open
            Found f = examine(weights, snap + "/config.json");
            f.where = "huggingface";
            if (standard) {
                // hf:ORG/NAME when main points here, else the ref that does, else the commit.
                const auto it = refs.find(commit);
                std::string rev = commit;
                if (it != refs.end()) {
                    const auto& names = it->second;
                    rev = std::find(names.begin(), names.end(), "main") != names.end() ? "main" : names.front();
                }
                f.spec = "hf:" + repo_id + (rev == "main" ? "" : "@" + rev);
            } else {
                f.spec = weights;  // a file hf: does not pick (open_clip_model.safetensors, ...): opened by its path
            }
            out.push_back(std::move(f));
        }
    }
    for (const std::string& n : torch_files) {
        if (!w.step(done++, total, n)) break;
        const std::string p = th + "/" + n;
        if (!is_regular(p)) continue;
        Found f = examine(p, "");
        f.where = "torch.hub";
        f.spec = p;
        out.push_back(std::move(f));
    }
    res.stopped = w.stopped;
    return res;
}

std::vector<Found> find_models(const std::string& hf_cache_arg, const std::string& torch_arg) {
    return scan_models(hf_cache_arg, torch_arg).found;
}

}  // namespace vit::hub
