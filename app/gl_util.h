// OpenGL helpers for the app: float textures coloured by shaders/heatmap.*,
// drawn inside ImGui through draw-list callbacks (Gfx), and screenshots.
#pragma once
#define GL_GLEXT_PROTOTYPES 1
#include <GL/glcorearb.h>
#include <imgui.h>

#include <deque>
#include <string>
#include <vector>

namespace vit::app {

struct Colormap {
    enum Mode { Sequential = 0, Diverging = 1, Overlay = 2 };
    int mode = Sequential;
    float vmin = 0, vmax = 1, opacity = 1;
};

// A 2D texture of one float channel (R32F, nearest filtering) or RGBA8.
class Texture {
public:
    Texture() = default;
    ~Texture();
    Texture(const Texture&) = delete;
    Texture& operator=(const Texture&) = delete;
    Texture(Texture&& o) noexcept : tex_(o.tex_), w_(o.w_), h_(o.h_), float_(o.float_) { o.tex_ = 0; }
    Texture& operator=(Texture&&) = delete;
    void upload_float(const float* data, int w, int h);
    void upload_rgba(const unsigned char* data, int w, int h);
    ImTextureID id() const { return (ImTextureID)(intptr_t)tex_; }
    int width() const { return w_; }
    int height() const { return h_; }
    bool valid() const { return tex_ != 0; }
private:
    void ensure(int w, int h, bool is_float);
    GLuint tex_ = 0;
    int w_ = 0, h_ = 0;
    bool float_ = false;
};

// The heatmap program (shaders/heatmap.*) and what draws with it, one per window (AppContext::gfx):
// float textures coloured by a Colormap inside ImGui's draw lists, through draw-list callbacks.
class Gfx {
public:
    Gfx() = default;
    ~Gfx();
    Gfx(const Gfx&) = delete;
    Gfx& operator=(const Gfx&) = delete;
    // Compiles the program (embedded sources, or files under shader_dir if given). Returns "" or the
    // compiler's log, which the app shows (error() keeps it).
    std::string init(const std::string& shader_dir = "");
    bool ok() const { return prog_ != 0; }
    const std::string& error() const { return error_; }
    // At the start of each frame: frees last frame's callback data.
    void begin_frame() { calls_.clear(); }
    // Draws tex over [p0, p1] coloured by `cm` (a copy is kept until rendering).
    void draw(ImDrawList* dl, const Texture& tex, ImVec2 p0, ImVec2 p1, const Colormap& cm,
              ImVec2 uv0 = ImVec2(0, 0), ImVec2 uv1 = ImVec2(1, 1), ImU32 tint = IM_COL32_WHITE);
    // A vertical 0..1 ramp (top = 1) for colour bars.
    const Texture& ramp();
    // A horizontal 0..1 ramp (left = 0) for keys laid along a picture.
    const Texture& hramp();

    struct Call { const Gfx* gfx; Colormap cm; };  // what a draw-list callback reads
    void bind(const Colormap& cm) const;           // the program and its uniforms, for a callback

private:
    GLuint prog_ = 0;
    GLint loc_proj_ = -1, loc_vmin_ = -1, loc_vmax_ = -1, loc_mode_ = -1, loc_opacity_ = -1, loc_tex_ = -1;
    std::deque<Call> calls_;
    Texture ramp_, hramp_;
    std::string error_;
};

// Reads the back buffer's rectangle (top-left origin) as RGB rows, top first.
std::vector<unsigned char> read_pixels(int x, int y, int w, int h, int fb_height);

}  // namespace vit::app
