// The window's "On this computer" scan (app/model_scan.h): off the UI thread, with progress, on a
// cache of link loops (issue 37: the UI thread walked refs/a -> . forever).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "app/model_scan.h"

namespace {
std::string temp_dir(const char* name) {
    std::string tpl = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/vitscope-scan-" + name + "-XXXXXX";
    return ::mkdtemp(tpl.data());
}
}  // namespace

TEST(ModelScan, RunsOffTheCallersThreadThroughLinkLoops) {
    const std::string d = temp_dir("hf"), st = d + "/models--o--n", none = temp_dir("torch");
    for (const char* sub : {"", "/refs", "/snapshots", "/snapshots/c0ffee", "/blobs"})
        ASSERT_EQ(::mkdir((st + sub).c_str(), 0755), 0);
    std::ofstream(st + "/refs/main") << "c0ffee";
    ASSERT_EQ(::symlink(".", (st + "/refs/a").c_str()), 0);
    ASSERT_EQ(::symlink(".", (st + "/refs/b").c_str()), 0);
    ASSERT_EQ(::symlink("/usr", (st + "/refs/x").c_str()), 0);
    {
        std::ifstream in(std::string(VITSCOPE_SOURCE_DIR) + "/assets/fmnist_vit.safetensors", std::ios::binary);
        std::ofstream out(st + "/blobs/w", std::ios::binary);
        out << in.rdbuf();
    }
    ASSERT_EQ(::symlink("../../blobs/w", (st + "/snapshots/c0ffee/model.safetensors").c_str()), 0);
    vit::app::ModelScan scan;
    EXPECT_FALSE(scan.started());
    EXPECT_FALSE(scan.result().has_value());
    scan.start(d, none);
    EXPECT_TRUE(scan.started());
    for (int i = 0; i < 3000 && scan.running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_FALSE(scan.running()) << "the scan did not end within 30 s";
    const auto r = scan.result();
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->found.size(), 1u);
    EXPECT_EQ(r->found[0].spec, "hf:o/n");
    EXPECT_TRUE(r->stopped.empty()) << r->stopped;
    EXPECT_EQ(scan.progress().total, 1u);
    // Rescan while one may be running, then leave: the destructor cancels and joins.
    scan.start(d, none);
    scan.start(d, none);
}
