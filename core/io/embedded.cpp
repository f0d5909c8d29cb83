// The embedded default model: assets/fmnist_vit.safetensors is assembled into
// the binary with .incbin, so `--model default` works from any directory.
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

namespace vit {
std::string embedded_model_bytes() {
#ifdef VITSCOPE_EMBEDDED_PATH
    return std::string(vitscope_embedded_begin, vitscope_embedded_end);
#else
    return {};
#endif
}
}  // namespace vit
