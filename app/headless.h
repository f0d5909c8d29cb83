// Headless drivers: what runs the frame loop when no user does. main() calls a driver's hooks
// around every frame; a driver returns an exit code when it is done.
//   ScreenshotDriver: --keys, --export-*, then --screenshot and --layout (JSON for tests); with
//                     --while-running, the screenshot while the pass the keys started runs
//   BenchDriver:      --bench-frames N [--bench-toggle]: frame times
//   SweepDriver:      --sweep: every stage x value/gradient x tab x overlay x toggle, 2 frames each,
//                     in this one process; reports every failure (exception, error, a view that
//                     shows nothing without saying why, overlapping or clipped labels, non-square cells)
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app_args.h"
#include "frame.h"

namespace vit::app {

class Driver {
public:
    virtual ~Driver() = default;
    virtual double poll_wait_ms() const { return 50.0; }
    virtual void before_poll(AppContext&) {}
    virtual void before_frame(AppContext&) {}  // after poll, before ImGui's NewFrame
    // After the frame is rendered and exports ran, before the swap: an exit code ends the run.
    virtual std::optional<int> after_render(AppContext& app, int W, int H) = 0;
    virtual void frame_failed(AppContext&, const std::string& what) { (void)what; }
};

std::unique_ptr<Driver> make_driver(const AppArgs& a);
std::unique_ptr<Driver> make_screenshot_driver(const AppArgs& a);  // headless_drivers.cpp
std::unique_ptr<Driver> make_bench_driver(const AppArgs& a);       // headless_drivers.cpp

// Writes the --layout JSON: where views were drawn, numbers, strings, labels, errors.
void write_layout(const std::string& path, AppContext& app, int W, int H);

}  // namespace vit::app
