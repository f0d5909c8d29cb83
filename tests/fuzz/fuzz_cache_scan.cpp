// The model-folder scan (hub::scan_models, `vitscope-cli models`, the window's "On this computer"):
// the input describes a Hugging Face cache and a torch.hub folder to build in a temporary folder:
// directories, small files (refs, configs, the start of a checkpoint) and symbolic links whose
// targets include ".", "..", "/" and the cache itself (loops). The scan must end within its limits,
// follow no directory link (nothing found outside the tree) and never crash; the tree is then removed
// without following a link.
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/io/hub.h"
#include "fuzz_common.h"

namespace {
const char* kNames[] = {"models--o--n", "models--a--b", "refs", "snapshots", "blobs", "c0ffee", "main", "pr", "1", "a",
                        "model.safetensors", "pytorch_model.bin", "config.json", "x.pth", "w", "datasets--d", ".locks",
                        "open_clip_model.safetensors", "deadbeef", "hub"};
const char* kTargets[] = {".", "..", "/", "/usr", "../../blobs/w", "../..", "main", "/dev/zero", "/dev/null", "ROOT",
                          "ROOT/models--o--n", "snapshots", "x.pth", "/nonexistent"};

std::string root;

int remove_entry(const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }
void clear() {
    ::nftw(root.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (root.empty()) {
        char tpl[] = "/tmp/vitscope-fuzz-scan-XXXXXX";
        if (!::mkdtemp(tpl)) std::abort();
        root = tpl;
    }
    clear();
    ::mkdir(root.c_str(), 0755);
    const std::string hf = root + "/hf", th = root + "/torch";
    ::mkdir(hf.c_str(), 0755);
    ::mkdir(th.c_str(), 0755);
    // records: op, depth, name indices..., then for files a length and bytes, for links a target
    size_t i = 0;
    auto next = [&]() -> unsigned { return i < size ? data[i++] : 0u; };
    for (int rec = 0; rec < 64 && i < size; ++rec) {
        const unsigned op = next() % 3, depth = 1 + next() % 5;
        std::string p = (next() & 1) ? th : hf;
        for (unsigned d = 0; d < depth; ++d) p += std::string("/") + kNames[next() % (sizeof kNames / sizeof *kNames)];
        if (op == 0) {
            ::mkdir(p.c_str(), 0755);
        } else if (op == 1) {
            const size_t n = std::min<size_t>(next() * 4, size - std::min(i, size));
            if (FILE* f = std::fopen(p.c_str(), "wb")) {
                std::fwrite(data + i, 1, n, f);
                std::fclose(f);
            }
            i += n;
        } else {
            std::string t = kTargets[next() % (sizeof kTargets / sizeof *kTargets)];
            if (t.rfind("ROOT", 0) == 0) t = hf + t.substr(4);
            ::symlink(t.c_str(), p.c_str());
        }
    }
    vit::hub::ScanLimits lim;
    lim.max_entries = 5000;
    lim.max_seconds = 5;
    size_t calls = 0;
    const vit::hub::ScanResult r = vit::hub::scan_models(hf, th, lim, [&](const vit::hub::ScanProgress& p) {
        if (p.done > p.total) std::abort();
        return ++calls < 10000;
    });
    for (const vit::hub::Found& f : r.found) {
        // found only inside the tree (a weights file may be a link to a blob, never a folder reached through one)
        if (f.path.rfind(root + "/", 0) != 0) std::abort();
        if (f.spec.empty() || (f.where != "huggingface" && f.where != "torch.hub")) std::abort();
    }
    return 0;
}
