#include "model_scan.h"

namespace vit::app {

ModelScan::~ModelScan() { join(); }

void ModelScan::join() {
    cancel_ = true;
    if (thread_.joinable()) thread_.join();
}

void ModelScan::cancel() { cancel_ = true; }

void ModelScan::start(const std::string& hf_cache, const std::string& torch_dir, const hub::ScanLimits& limits) {
    join();
    cancel_ = false;
    running_ = true;
    started_ = true;
    {
        std::lock_guard<std::mutex> l(mu_);
        progress_ = {};
    }
    thread_ = std::thread([this, hf_cache, torch_dir, limits] {
        hub::ScanResult r;
        try {
            r = hub::scan_models(hf_cache, torch_dir, limits, [this](const hub::ScanProgress& p) {
                std::lock_guard<std::mutex> l(mu_);
                progress_ = p;
                return !cancel_.load();
            });
        } catch (const std::exception& e) {
            r.stopped = std::string("failed: ") + e.what();
        }
        {
            std::lock_guard<std::mutex> l(mu_);
            result_ = std::move(r);
        }
        running_ = false;
    });
}

hub::ScanProgress ModelScan::progress() const {
    std::lock_guard<std::mutex> l(mu_);
    return progress_;
}

std::optional<hub::ScanResult> ModelScan::result() const {
    std::lock_guard<std::mutex> l(mu_);
    return result_;
}

}  // namespace vit::app
