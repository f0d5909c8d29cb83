#include "gl_util.h"

#include <algorithm>
#include <deque>
#include <fstream>
#include <sstream>

#include "shaders_embedded.h"

namespace vit::app {

namespace {

GLuint compile(GLenum type, const std::string& src, std::string& log) {
    GLuint s = glCreateShader(type);
    const char* p = src.c_str();
    glShaderSource(s, 1, &p, nullptr);
    glCompileShader(s);
    GLint ok = 0;
    glGetShaderiv(s, GL_COMPILE_STATUS, &ok);
    if (!ok) {
        char buf[4096];
        glGetShaderInfoLog(s, sizeof buf, nullptr, buf);
        log += std::string(type == GL_VERTEX_SHADER ? "heatmap.vert: " : "heatmap.frag: ") + buf;
        glDeleteShader(s);
        return 0;
    }
    return s;
}

void set_state(const ImDrawList*, const ImDrawCmd* cmd) {
    const auto* call = static_cast<const Gfx::Call*>(cmd->UserCallbackData);
    call->gfx->bind(call->cm);
}

std::string read_text(const std::string& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}
}  // namespace

Texture::~Texture() {
    if (tex_) glDeleteTextures(1, &tex_);
}

void Texture::ensure(int w, int h, bool is_float) {
    if (!tex_) glGenTextures(1, &tex_);
    glBindTexture(GL_TEXTURE_2D, tex_);
    if (w != w_ || h != h_ || is_float != float_) {
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
        glTexImage2D(GL_TEXTURE_2D, 0, is_float ? GL_R32F : GL_RGBA8, w, h, 0, is_float ? GL_RED : GL_RGBA,
                     is_float ? GL_FLOAT : GL_UNSIGNED_BYTE, nullptr);
        w_ = w; h_ = h; float_ = is_float;
    }
}

void Texture::upload_float(const float* data, int w, int h) {
    ensure(w, h, true);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, w, h, GL_RED, GL_FLOAT, data);
}

void Texture::upload_rgba(const unsigned char* data, int w, int h) {
    ensure(w, h, false);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, data);
}

Gfx::~Gfx() {
    if (prog_) glDeleteProgram(prog_);
}

void Gfx::bind(const Colormap& cm) const {
    ImDrawData* dd = ImGui::GetDrawData();
    float L = dd->DisplayPos.x, R = L + dd->DisplaySize.x, T = dd->DisplayPos.y, B = T + dd->DisplaySize.y;
    const float ortho[4][4] = {{2.f / (R - L), 0, 0, 0}, {0, 2.f / (T - B), 0, 0}, {0, 0, -1, 0},
                               {(R + L) / (L - R), (T + B) / (B - T), 0, 1}};
    glUseProgram(prog_);
    glUniformMatrix4fv(loc_proj_, 1, GL_FALSE, &ortho[0][0]);
    glUniform1i(loc_tex_, 0);
    glUniform1f(loc_vmin_, cm.vmin);
    glUniform1f(loc_vmax_, cm.vmax);
    glUniform1i(loc_mode_, cm.mode);
    glUniform1f(loc_opacity_, cm.opacity);
}

std::string Gfx::init(const std::string& dir) {
    std::string vs = dir.empty() ? kHeatmapVert : read_text(dir + "/heatmap.vert");
    std::string fs = dir.empty() ? kHeatmapFrag : read_text(dir + "/heatmap.frag");
    std::string log;
    GLuint v = compile(GL_VERTEX_SHADER, vs, log), f = compile(GL_FRAGMENT_SHADER, fs, log);
    if (!v || !f) return error_ = log;
    GLuint p = glCreateProgram();
    glAttachShader(p, v);
    glAttachShader(p, f);
    glLinkProgram(p);
    glDeleteShader(v);
    glDeleteShader(f);
    GLint ok = 0;
    glGetProgramiv(p, GL_LINK_STATUS, &ok);
    if (!ok) {
        char buf[4096];
        glGetProgramInfoLog(p, sizeof buf, nullptr, buf);
        glDeleteProgram(p);
        return error_ = std::string("heatmap program link: ") + buf;
    }
    if (prog_) glDeleteProgram(prog_);
    prog_ = p;
    loc_proj_ = glGetUniformLocation(p, "ProjMtx");
    loc_tex_ = glGetUniformLocation(p, "Texture");
    loc_vmin_ = glGetUniformLocation(p, "vmin");
    loc_vmax_ = glGetUniformLocation(p, "vmax");
    loc_mode_ = glGetUniformLocation(p, "mode");
    loc_opacity_ = glGetUniformLocation(p, "opacity");
    return error_ = "";
}

const Texture& Gfx::ramp() {
    if (!ramp_.valid()) {
        float v[256];
        for (int i = 0; i < 256; ++i) v[i] = 1.f - i / 255.f;  // top of the bar = vmax
        ramp_.upload_float(v, 1, 256);
    }
    return ramp_;
}

const Texture& Gfx::hramp() {
    if (!hramp_.valid()) {
        float v[256];
        for (int i = 0; i < 256; ++i) v[i] = i / 255.f;
        hramp_.upload_float(v, 256, 1);
    }
    return hramp_;
}

void Gfx::draw(ImDrawList* dl, const Texture& tex, ImVec2 p0, ImVec2 p1, const Colormap& cm, ImVec2 uv0, ImVec2 uv1, ImU32 tint) {
    if (!tex.valid()) return;
    if (!prog_) {  // shader failed: show a flat placeholder rather than garbage
        dl->AddRectFilled(p0, p1, IM_COL32(80, 0, 80, 255));
        return;
    }
    calls_.push_back({this, cm});
    dl->AddCallback(set_state, &calls_.back());
    dl->AddImage(tex.id(), p0, p1, uv0, uv1, tint);  // the shader multiplies by it (a fade)
    dl->AddCallback(ImDrawCallback_ResetRenderState, nullptr);
}

std::vector<unsigned char> read_pixels(int x, int y, int w, int h, int fb_height) {
    std::vector<unsigned char> rgb(size_t(w) * h * 3), row(size_t(w) * 3);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadBuffer(GL_BACK);
    glReadPixels(x, fb_height - y - h, w, h, GL_RGB, GL_UNSIGNED_BYTE, rgb.data());
    for (int r = 0; r < h / 2; ++r) {  // GL's origin is bottom-left
        std::copy_n(rgb.data() + size_t(r) * w * 3, w * 3, row.data());
        std::copy_n(rgb.data() + size_t(h - 1 - r) * w * 3, w * 3, rgb.data() + size_t(r) * w * 3);
        std::copy_n(row.data(), w * 3, rgb.data() + size_t(h - 1 - r) * w * 3);
    }
    return rgb;
}

}  // namespace vit::app
