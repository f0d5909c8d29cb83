#include "core/io/scenes.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "core/io/image.h"
#include "core/io/io.h"
#include "core/model/model.h"

namespace vit {

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

namespace {

struct Rng {
    uint64_t s;
    uint64_t next() { return splitmix64(s); }
    float u() { return float(double(next() >> 11) * 0x1.0p-53); }     // [0, 1)
    int range(int lo, int hi) { return lo + int(next() % uint64_t(hi - lo + 1)); }  // [lo, hi]
};

struct Rgb {
    float r, g, b;
};

Rgb hsv(float h, float s, float v) {
    h = (h - std::floor(h)) * 6.f;
    const int i = int(h) % 6;
    const float f = h - std::floor(h), p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
    switch (i) {
        case 0: return {v, t, p};
        case 1: return {q, v, p};
        case 2: return {p, v, t};
        case 3: return {p, q, v};
        case 4: return {t, p, v};
        default: return {v, p, q};
    }
}

float dist(Rgb a, Rgb b) { return std::sqrt((a.r - b.r) * (a.r - b.r) + (a.g - b.g) * (a.g - b.g) + (a.b - b.b) * (a.b - b.b)); }

// The background: a colour with one of four low-contrast textures and a little per-pixel noise.
void draw_background(Rng& r, int S, std::vector<float>& px, Rgb& base) {
    base = hsv(r.u(), 0.15f + 0.45f * r.u(), 0.25f + 0.6f * r.u());
    const int kind = r.range(0, 3);
    const float a = 6.2831853f * r.u(), period = 6.f + 10.f * r.u(), amp = 0.05f + 0.08f * r.u();
    const int cell = r.range(4, 12);
    float grid[9][9];
    for (auto& row : grid)
        for (float& g : row) g = 2.f * r.u() - 1.f;
    const float ca = std::cos(a), sa = std::sin(a);
    for (int y = 0; y < S; ++y)
        for (int x = 0; x < S; ++x) {
            float t = 0;
            switch (kind) {
                case 0: t = amp * 2.f * ((x - S / 2.f) * ca + (y - S / 2.f) * sa) / float(S); break;
                case 1: t = amp * std::sin(6.2831853f * (x * ca + y * sa) / period); break;
                case 2: t = ((x / cell + y / cell) % 2) ? amp : -amp; break;
                default: {
                    const float gx = x * 8.f / S, gy = y * 8.f / S;
                    const int ix = std::min(int(gx), 7), iy = std::min(int(gy), 7);
                    const float fx = gx - ix, fy = gy - iy;
                    t = 1.5f * amp * ((grid[iy][ix] * (1 - fx) + grid[iy][ix + 1] * fx) * (1 - fy) +
                                      (grid[iy + 1][ix] * (1 - fx) + grid[iy + 1][ix + 1] * fx) * fy);
                }
            }
            float* p = &px[(size_t(y) * S + x) * 3];
            p[0] = base.r + t + 0.04f * (r.u() - 0.5f);
            p[1] = base.g + t + 0.04f * (r.u() - 0.5f);
            p[2] = base.b + t + 0.04f * (r.u() - 0.5f);
        }
}

// The item scaled to L x L (bilinear, pixel centres aligned), flipped or not: its opacity in [0, 1] and its
// shade. Faint values (under 8/255, the dataset's noise floor) are fully transparent.
void scaled_item(const uint8_t* src, int L, bool flip, std::vector<float>& alpha, std::vector<float>& shade) {
    alpha.assign(size_t(L) * L, 0.f);
    shade.assign(size_t(L) * L, 0.f);
    const float sc = 28.f / L;
    for (int y = 0; y < L; ++y)
        for (int x = 0; x < L; ++x) {
            const float sy = std::clamp((y + 0.5f) * sc - 0.5f, 0.f, 27.f);
            float sx = std::clamp((x + 0.5f) * sc - 0.5f, 0.f, 27.f);
            if (flip) sx = 27.f - sx;
            const int y0 = std::min(int(sy), 26), x0 = std::min(int(sx), 26);
            const float fy = sy - y0, fx = sx - x0;
            const auto at = [&](int yy, int xx) { return src[yy * 28 + xx] / 255.f; };
            const float v = (at(y0, x0) * (1 - fx) + at(y0, x0 + 1) * fx) * (1 - fy) +
                            (at(y0 + 1, x0) * (1 - fx) + at(y0 + 1, x0 + 1) * fx) * fy;
            alpha[size_t(y) * L + x] = std::clamp((v - 8.f / 255.f) * 3.5f, 0.f, 1.f);
            shade[size_t(y) * L + x] = 0.35f + 0.65f * v;
        }
}

// One distractor: a disc, a square, a ring, a bar, a triangle or a plus, of side `n`, at (x0, y0).
void draw_shape(int kind, int x0, int y0, int n, Rgb c, int S, std::vector<float>& px) {
    const float h = n / 2.f, cx = x0 + h, cy = y0 + h;
    for (int y = y0; y < y0 + n; ++y)
        for (int x = x0; x < x0 + n; ++x) {
            if (x < 0 || y < 0 || x >= S || y >= S) continue;
            const float dx = x + 0.5f - cx, dy = y + 0.5f - cy, rr = std::sqrt(dx * dx + dy * dy);
            bool in = false;
            switch (kind) {
                case 0: in = rr <= h; break;
                case 1: in = true; break;
                case 2: in = rr <= h && rr >= h * 0.55f; break;
                case 3: in = std::fabs(dy) <= std::max(1.f, n / 6.f); break;
                case 4: in = std::fabs(dx) <= (y + 0.5f - y0) / 2.f; break;
                default: in = std::fabs(dx) <= n / 6.f + 0.5f || std::fabs(dy) <= n / 6.f + 0.5f; break;
            }
            if (!in) continue;
            float* p = &px[(size_t(y) * S + x) * 3];
            p[0] = c.r; p[1] = c.g; p[2] = c.b;
        }
}

}  // namespace

SceneOptions scene_options(const Config& c, bool object) {
    SceneOptions o;
    o.size = c.image_size;
    o.object = object;
    o.grid = c.patch;
    return o;
}

Scene make_scene(const Dataset& d, int item, uint64_t seed, const SceneOptions& o) {
    if (d.rows != 28 || d.cols != 28)
        throw std::invalid_argument("scenes are made of 28 x 28 Fashion-MNIST items; this dataset holds " +
                                    std::to_string(d.rows) + " x " + std::to_string(d.cols) + " images");
    if (item < 0 || item >= d.n)
        throw std::invalid_argument("scene item " + std::to_string(item) + " is outside the dataset's " + std::to_string(d.n) + " images");
    if (o.size < 48 || o.size > 1024) throw std::invalid_argument("a scene is 48 to 1024 pixels wide, not " + std::to_string(o.size));
    const int S = o.size, L = S / 2, step = o.grid > 0 ? o.grid : S / 8;
    if (o.grid < 0 || step > S - L)
        throw std::invalid_argument("a " + std::to_string(S) + "-pixel scene's object moves on a grid of 1 to " + std::to_string(S - L) +
                                    " pixels, not " + std::to_string(o.grid));
    Rng r{seed ^ 0x5CE7E5C0FFEEull};
    Scene sc;
    sc.size = S;
    sc.item = item;
    sc.label = d.labels[item];
    std::vector<float> px(size_t(S) * S * 3);
    Rgb base{};
    draw_background(r, S, px, base);

    // The object: the item at half the scene's side (32 x 32 pixels in a 64-pixel scene, 8/7 of its size: its
    // details stay; four by four patches of the scenes model), placed on the patch grid anywhere in the scene. On the grid, a patch holds the same part of
    // the item wherever the item is, as a centred item does for a Fashion-MNIST model: a ViT trained from scratch
    // on 2 cores learns to classify such scenes in minutes, not the hours that items shifted by a fraction of a
    // patch take (an earlier recipe, 28-41 pixels anywhere, stalled at 51% after six epochs).
    const bool flip = r.next() & 1;
    const int ox = r.range(0, (S - L) / step) * step, oy = r.range(0, (S - L) / step) * step;
    Rgb tint = hsv(r.u(), 0.45f + 0.55f * r.u(), 0.65f + 0.35f * r.u());
    for (int k = 0; k < 20 && dist(tint, base) < 0.45f; ++k) tint = hsv(r.u(), 0.45f + 0.55f * r.u(), 0.65f + 0.35f * r.u());
    std::vector<float> alpha, shade;
    scaled_item(d.images.data() + size_t(item) * 28 * 28, L, flip, alpha, shade);
    int bx0 = S, by0 = S, bx1 = 0, by1 = 0;
    for (int y = 0; y < L; ++y)
        for (int x = 0; x < L; ++x)
            if (alpha[size_t(y) * L + x] > 0) {
                bx0 = std::min(bx0, ox + x); bx1 = std::max(bx1, ox + x + 1);
                by0 = std::min(by0, oy + y); by1 = std::max(by1, oy + y + 1);
            }
    if (bx1 <= bx0) { bx0 = ox; by0 = oy; bx1 = ox + L; by1 = oy + L; }  // a blank item: its square
    sc.box = {bx0, by0, bx1, by1};
    sc.square = {ox, oy, ox + L, oy + L};

    // Clutter: 2 to 6 shapes of 5 to 14 pixels, none touching the object's box.
    const int want = r.range(2, 6);
    for (int k = 0; k < want; ++k) {
        const int kind = r.range(0, 5), n = r.range(5, 14) * S / kSceneSize;
        const Rgb c = hsv(r.u(), 0.3f + 0.7f * r.u(), 0.35f + 0.65f * r.u());
        for (int tries = 0; tries < 40; ++tries) {
            const int x0 = r.range(0, S - n), y0 = r.range(0, S - n);
            if (x0 < bx1 + 1 && x0 + n > bx0 - 1 && y0 < by1 + 1 && y0 + n > by0 - 1) continue;
            draw_shape(kind, x0, y0, n, c, S, px);
            ++sc.clutter;
            sc.clutter_boxes.push_back({x0, y0, x0 + n, y0 + n});
            break;
        }
    }

    sc.mask.assign(size_t(S) * S, 0);
    if (o.object)
        for (int y = 0; y < L; ++y)
            for (int x = 0; x < L; ++x) {
                const float a = alpha[size_t(y) * L + x];
                if (a <= 0) continue;
                const float s = shade[size_t(y) * L + x];
                float* p = &px[(size_t(oy + y) * S + ox + x) * 3];
                p[0] = a * tint.r * s + (1 - a) * p[0];
                p[1] = a * tint.g * s + (1 - a) * p[1];
                p[2] = a * tint.b * s + (1 - a) * p[2];
                sc.mask[size_t(oy + y) * S + ox + x] = 1;
            }
    sc.rgb.resize(px.size());
    for (size_t i = 0; i < px.size(); ++i) sc.rgb[i] = uint8_t(std::lround(std::clamp(px[i], 0.f, 1.f) * 255.f));
    return sc;
}

Scene object_crop(const Scene& s) {
    const int x0 = s.square[0], y0 = s.square[1], L = s.square[2] - x0;
    if (L <= 0 || s.square[3] - y0 != L || x0 < 0 || y0 < 0 || s.square[2] > s.size || s.square[3] > s.size)
        throw std::invalid_argument("the scene's object square is not a square inside it");
    Scene c;
    c.size = L;
    c.item = s.item;
    c.label = s.label;
    c.box = {s.box[0] - x0, s.box[1] - y0, s.box[2] - x0, s.box[3] - y0};
    c.square = {0, 0, L, L};
    c.rgb.resize(size_t(L) * L * 3);
    c.mask.resize(size_t(L) * L);
    for (int y = 0; y < L; ++y) {
        const size_t from = size_t(y0 + y) * s.size + x0;
        std::copy_n(s.rgb.begin() + from * 3, size_t(L) * 3, c.rgb.begin() + size_t(y) * L * 3);
        std::copy_n(s.mask.begin() + from, size_t(L), c.mask.begin() + size_t(y) * L);
    }
    for (const auto& b : s.clutter_boxes) {
        const std::array<int, 4> k{std::max(b[0] - x0, 0), std::max(b[1] - y0, 0), std::min(b[2] - x0, L), std::min(b[3] - y0, L)};
        if (k[0] < k[2] && k[1] < k[3]) c.clutter_boxes.push_back(k);
    }
    c.clutter = int(c.clutter_boxes.size());
    return c;
}

SceneDraw scene_draw(const Dataset& d, uint64_t seed, int i) {
    if (d.n <= 0) throw std::invalid_argument("the dataset is empty: no scenes to draw");
    // An affine permutation of the split, i -> (a i + b) mod n with gcd(a, n) = 1, fixed by the seed.
    uint64_t st = seed * 0x2545F4914F6CDD1Dull + 17;
    const uint64_t n = uint64_t(d.n);
    uint64_t a = n > 1 ? 1 + splitmix64(st) % (n - 1) : 1;
    while (std::gcd(a, n) != 1) a = a % (n - 1) + 1;
    const uint64_t b = splitmix64(st) % n;
    SceneDraw s;
    s.item = int((a * (uint64_t(i) % n) + b) % n);
    uint64_t t = seed ^ (uint64_t(i) * 0xD1B54A32D192ED03ull);
    s.seed = splitmix64(t);
    return s;
}

Tensor3 scene_input(const Scene& s, const std::vector<float>& mean, const std::vector<float>& stdev) {
    const size_t S = size_t(s.size);
    Tensor3 x = Tensor3::from_shape({3, S, S});
    for (size_t c = 0; c < 3; ++c) {
        const float m = mean.size() == 3 ? mean[c] : 0.5f, sd = stdev.size() == 3 ? stdev[c] : 0.5f;
        for (size_t i = 0; i < S * S; ++i) x.data()[c * S * S + i] = (s.rgb[i * 3 + c] / 255.f - m) / sd;
    }
    return x;
}

Image scene_image(const Scene& s) {
    const size_t S = size_t(s.size);
    Image im;
    im.pixels = Tensor3::from_shape({3, S, S});
    for (size_t c = 0; c < 3; ++c)
        for (size_t i = 0; i < S * S; ++i) im.pixels.data()[c * S * S + i] = s.rgb[i * 3 + c] / 255.f;
    im.width = im.height = s.size;
    im.channels = im.file_channels = 3;
    return im;
}

bool is_scenes_model(const Config& c) { return c.name == "scenes-vit" && c.channels == 3 && c.classes == 10; }

bool patch_on_object(const Scene& s, int patch_index, int patch) {
    const int g = s.size / patch, py = patch_index / g, px = patch_index % g;
    const float cx = px * patch + patch / 2.f, cy = py * patch + patch / 2.f;
    return cx >= s.box[0] && cx < s.box[2] && cy >= s.box[1] && cy < s.box[3];
}

namespace {
std::array<int, 4> box_of(const nlohmann::json& j, int w, int h, const std::string& what) {
    if (!j.is_array() || j.size() != 4) throw FileError(what + ": a box is [x0, y0, x1, y1]");
    std::array<int, 4> b{};
    for (size_t k = 0; k < 4; ++k) {
        if (!j[k].is_number_integer()) throw FileError(what + ": a box holds whole pixels");
        b[k] = j[k].get<int>();
    }
    if (b[0] < 0 || b[1] < 0 || b[2] > w || b[3] > h || b[0] >= b[2] || b[1] >= b[3])
        throw FileError(what + ": box [" + std::to_string(b[0]) + ", " + std::to_string(b[1]) + ", " + std::to_string(b[2]) +
                        ", " + std::to_string(b[3]) + "] is not inside the " + std::to_string(w) + "x" + std::to_string(h) + " image");
    return b;
}
}  // namespace

std::optional<SceneTruth> read_scene_truth(const std::string& image_path, int width, int height) {
    namespace fs = std::filesystem;
    const fs::path img(image_path);
    const std::string labels = (img.parent_path().empty() ? fs::path(".") : img.parent_path()) / "labels.json";
    struct stat sb;
    if (::stat(labels.c_str(), &sb) != 0) return std::nullopt;
    if (!S_ISREG(sb.st_mode)) throw FileError(labels + ": is not a regular file");
    if (sb.st_size > (64 << 20)) throw FileError(labels + ": " + std::to_string(sb.st_size) + " bytes, over the 64 MiB a scenes' labels.json may hold");
    const nlohmann::json j = nlohmann::json::parse(read_file(labels), nullptr, false);
    if (j.is_discarded() || !j.is_array()) throw FileError(labels + ": not a JSON list of scenes ({\"file\", \"label\", \"box\"...})");
    const std::string name = img.filename().string();
    for (const auto& e : j) {
        if (!e.is_object() || !e.contains("file") || !e["file"].is_string() || e["file"].get<std::string>() != name) continue;
        const std::string what = labels + " (" + name + ")";
        SceneTruth t;
        t.width = width;
        t.height = height;
        if (!e.contains("label") || !e["label"].is_number_integer()) throw FileError(what + ": no integer \"label\"");
        t.label = e["label"].get<int>();
        if (e.contains("class") && e["class"].is_string()) t.cls = e["class"].get<std::string>();
        if (!e.contains("box")) throw FileError(what + ": no \"box\"");
        t.box = box_of(e["box"], width, height, what);
        if (e.contains("clutter")) {
            if (!e["clutter"].is_array() || e["clutter"].size() > 64) throw FileError(what + ": \"clutter\" is a list of at most 64 boxes");
            for (const auto& c : e["clutter"]) t.clutter.push_back(box_of(c, width, height, what));
        }
        return t;
    }
    return std::nullopt;
}

std::string scene_labels_entry(const Scene& s, const std::string& file, const std::string& cls, const std::string& split) {
    nlohmann::json clutter = nlohmann::json::array();
    for (const auto& b : s.clutter_boxes) clutter.push_back({b[0], b[1], b[2], b[3]});
    const nlohmann::json e = {{"file", file}, {"label", s.label}, {"class", cls}, {"box", {s.box[0], s.box[1], s.box[2], s.box[3]}},
                              {"clutter", clutter}, {"item", s.item}, {"split", split}};
    return e.dump();
}

}  // namespace vit
