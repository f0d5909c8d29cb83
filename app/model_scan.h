// "On this computer": the Hugging Face cache and torch.hub's folder scanned on a thread of their own,
// with progress, so the window never waits for a disk (issue 37: the scan ran on the UI thread, and a
// cache with refs/a -> . froze the window for good). No GL here: tests/test_model_scan.cpp runs it.
#pragma once
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/io/hub.h"

namespace vit::app {

class ModelScan {
public:
    ModelScan() = default;
    ~ModelScan();  // cancels a scan under way and waits for it (bounded: hub::ScanLimits)
    ModelScan(const ModelScan&) = delete;
    ModelScan& operator=(const ModelScan&) = delete;

    // Starts a scan (of the folders the environment names when empty); one under way is cancelled first.
    void start(const std::string& hf_cache = "", const std::string& torch_dir = "", const hub::ScanLimits& limits = {});
    void cancel();
    bool started() const { return started_; }
    bool running() const { return running_.load(); }
    hub::ScanProgress progress() const;
    // The last finished scan's result (complete, stopped by a limit, or cancelled); none before one finished.
    std::optional<hub::ScanResult> result() const;

private:
    void join();
    std::thread thread_;
    std::atomic<bool> cancel_{false}, running_{false};
    bool started_ = false;
    mutable std::mutex mu_;
    hub::ScanProgress progress_;
    std::optional<hub::ScanResult> result_;
};

}  // namespace vit::app
