// The embedded models: assets/fmnist_vit.safetensors (`default`) and assets/scenes_vit.safetensors
// (`scenes`) are assembled into the binary with .incbin, so both work from any directory. The
// ImageNet-1k class list (assets/classes/imagenet1k.txt) is built in the same way,
// so every 1000-class head is named without looking for a data directory.
#include <string>

#ifdef VITSCOPE_EMBEDDED_PATH
__asm__(".section .rodata\n"
        ".balign 16\n"
        ".global vitscope_embedded_begin\n"
        "vitscope_embedded_begin:\n"
        ".incbin \"" VITSCOPE_EMBEDDED_PATH "\"\n"
        ".global vitscope_embedded_end\n"
        "vitscope_embedded_end:\n"
        ".previous\n");
extern "C" const char vitscope_embedded_begin[];
extern "C" const char vitscope_embedded_end[];
#endif

#ifdef VITSCOPE_SCENES_PATH
__asm__(".section .rodata\n"
        ".balign 16\n"
        ".global vitscope_scenes_begin\n"
        "vitscope_scenes_begin:\n"
        ".incbin \"" VITSCOPE_SCENES_PATH "\"\n"
        ".global vitscope_scenes_end\n"
        "vitscope_scenes_end:\n"
        ".previous\n");
extern "C" const char vitscope_scenes_begin[];
extern "C" const char vitscope_scenes_end[];
#endif

#ifdef VITSCOPE_IMAGENET_PATH
__asm__(".section .rodata\n"
        ".global vitscope_imagenet_begin\n"
        "vitscope_imagenet_begin:\n"
        ".incbin \"" VITSCOPE_IMAGENET_PATH "\"\n"
        ".global vitscope_imagenet_end\n"
        "vitscope_imagenet_end:\n"
        ".previous\n");
extern "C" const char vitscope_imagenet_begin[];
extern "C" const char vitscope_imagenet_end[];
#endif

namespace vit {
std::string imagenet1k_names_text() {
#ifdef VITSCOPE_IMAGENET_PATH
    return std::string(vitscope_imagenet_begin, vitscope_imagenet_end);
#else
    return {};
#endif
}

std::string embedded_scenes_bytes() {
#ifdef VITSCOPE_SCENES_PATH
    return std::string(vitscope_scenes_begin, vitscope_scenes_end);
#else
    return {};
#endif
}

std::string embedded_model_bytes() {
#ifdef VITSCOPE_EMBEDDED_PATH
    return std::string(vitscope_embedded_begin, vitscope_embedded_end);
#else
    return {};
#endif
}
}  // namespace vit
