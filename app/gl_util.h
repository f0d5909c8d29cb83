// OpenGL helpers for the app: float textures coloured by shaders/heatmap.*,
// drawn inside ImGui through draw-list callbacks, and screenshots.
#pragma once
#define GL_GLEXT_PROTOTYPES 1
#include <GL/glcorearb.h>
#include <imgui.h>

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

// Compiles the heatmap program (embedded sources, or files under shader_dir
// if given). Returns "" or the compiler's log, which the app shows.
std::string init_heatmap_program(const std::string& shader_dir = "");
bool heatmap_program_ok();

// Draws tex over [p0, p1] coloured by `cm` (a copy is kept until rendering).
void draw_colormapped(ImDrawList* dl, const Texture& tex, ImVec2 p0, ImVec2 p1, const Colormap& cm,
                      ImVec2 uv0 = ImVec2(0, 0), ImVec2 uv1 = ImVec2(1, 1));
// Call at the start of each frame (frees last frame's callback data).
void begin_frame_gl();

// Reads the back buffer's rectangle (top-left origin) as RGB rows, top first.
std::vector<unsigned char> read_pixels(int x, int y, int w, int h, int fb_height);

}  // namespace vit::app
