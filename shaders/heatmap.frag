#version 330 core
// Colours a single-channel float texture on the GPU.
//   Mode 0: sequential (viridis) over [vmin, vmax]
//   Mode 1: diverging blue-white-red, centred on 0 when vmin = -vmax
//   Mode 2: overlay: viridis (the colours of every attention picture) with alpha rising with the value
// NaN is magenta; +Inf and -Inf are magenta striped with white and black (the legends say so).
in vec2 Frag_UV;
in vec4 Frag_Color;
uniform sampler2D Texture;
uniform float vmin;
uniform float vmax;
uniform int mode;
uniform float opacity;
out vec4 Out_Color;

// Polynomial fit of matplotlib's viridis (max error ~1/255 per channel).
vec3 viridis(float t) {
    const vec3 c0 = vec3(0.2777273272234177, 0.005407344544966578, 0.3340998053353061);
    const vec3 c1 = vec3(0.1050930431085774, 1.404613529898575, 1.384590162594685);
    const vec3 c2 = vec3(-0.3308618287255563, 0.214847559468213, 0.09509516302823659);
    const vec3 c3 = vec3(-4.634230498983486, -5.799100973351585, -19.33244095627987);
    const vec3 c4 = vec3(6.228269936347081, 14.17993336680509, 56.69055260068105);
    const vec3 c5 = vec3(4.776384997670288, -13.74514537774601, -65.35303263337234);
    const vec3 c6 = vec3(-5.435455855934631, 4.645852612178535, 26.3124352495832);
    return clamp(c0 + t * (c1 + t * (c2 + t * (c3 + t * (c4 + t * (c5 + t * c6))))), 0.0, 1.0);
}

vec3 diverging(float t) {
    const vec3 blue = vec3(0.230, 0.299, 0.754);
    const vec3 white = vec3(0.965, 0.965, 0.965);
    const vec3 red = vec3(0.706, 0.016, 0.150);
    return t < 0.5 ? mix(blue, white, t * 2.0) : mix(white, red, (t - 0.5) * 2.0);
}

void main() {
    float v = texture(Texture, Frag_UV.st).r;
    float t = vmax > vmin ? clamp((v - vmin) / (vmax - vmin), 0.0, 1.0) : 0.5;
    if (isnan(v)) {
        Out_Color = vec4(1.0, 0.0, 1.0, 1.0);
    } else if (isinf(v)) {
        float stripe = mod(floor((gl_FragCoord.x + gl_FragCoord.y) / 3.0), 2.0);
        Out_Color = stripe < 1.0 ? vec4(1.0, 0.0, 1.0, 1.0) : (v > 0.0 ? vec4(1.0) : vec4(0.0, 0.0, 0.0, 1.0));
    } else if (mode == 1) {
        Out_Color = vec4(diverging(t), 1.0);
    } else if (mode == 2) {
        Out_Color = vec4(viridis(t), opacity * (0.2 + 0.8 * t));
    } else {
        Out_Color = vec4(viridis(t), 1.0);
    }
    Out_Color *= Frag_Color;
}
