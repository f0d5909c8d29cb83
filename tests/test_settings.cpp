// app/settings.cpp and app/paths.cpp: what the app remembers between launches,
// and where it finds its data. Plain files in a temporary directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "app/paths.h"
#include "app/settings.h"

namespace fs = std::filesystem;
using vit::app::Settings;

namespace {

struct TempDir {
    fs::path p;
    TempDir() {
        p = fs::temp_directory_path() / ("vitscope-settings-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(p);
        fs::create_directories(p);
    }
    ~TempDir() { fs::remove_all(p); }
};

std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}
void spit(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

struct EnvVar {
    std::string name, old;
    bool had;
    EnvVar(const char* n, const char* v) : name(n) {
        const char* o = std::getenv(n);
        had = o != nullptr;
        if (had) old = o;
        if (v) ::setenv(n, v, 1); else ::unsetenv(n);
    }
    ~EnvVar() { if (had) ::setenv(name.c_str(), old.c_str(), 1); else ::unsetenv(name.c_str()); }
};

}  // namespace

TEST(Settings, DefaultPathFollowsXdgThenHome) {
    {
        EnvVar x("XDG_CONFIG_HOME", "/cfg"), h("HOME", "/home/u");
        EXPECT_EQ(Settings::default_path(), "/cfg/vitscope/settings.json");
    }
    {
        EnvVar x("XDG_CONFIG_HOME", nullptr), h("HOME", "/home/u");
        EXPECT_EQ(Settings::default_path(), "/home/u/.config/vitscope/settings.json");
    }
    {
        EnvVar x("XDG_CONFIG_HOME", "relative/dir"), h("HOME", "/home/u");  // invalid per the XDG spec: ignored
        EXPECT_EQ(Settings::default_path(), "/home/u/.config/vitscope/settings.json");
    }
    {
        EnvVar x("XDG_CONFIG_HOME", nullptr), h("HOME", nullptr);
        EXPECT_EQ(Settings::default_path(), "");
    }
}

TEST(Settings, OffWhenNoPath) {
    Settings s("");
    EXPECT_FALSE(s.enabled());
    s.load();
    s.add_recent_image("/a.png");
    EXPECT_TRUE(s.save());
    EXPECT_FALSE(s.dirty());
}

TEST(Settings, MissingFileMeansDefaultsAndNoError) {
    TempDir t;
    Settings s((t.p / "sub" / "settings.json").string());
    s.load();
    EXPECT_TRUE(s.error().empty());
    EXPECT_TRUE(s.data() == vit::app::SettingsData{});
    EXPECT_FALSE(s.dirty());  // nothing to write until something changes
    EXPECT_FALSE(fs::exists(t.p / "sub"));
}

TEST(Settings, RoundTripCreatesDirectoryAndLeavesNoTemporaries) {
    TempDir t;
    fs::path f = t.p / "vitscope" / "settings.json";
    {
        Settings s(f.string());
        s.load();
        s.add_recent_model("vit-b16");
        s.add_recent_model("/m/a.safetensors");
        s.add_recent_image("/i/x.png");
        s.data().options.affine = false;
        s.data().options.unbiased = true;
        s.data().options.pooling = vit::Pooling::Mean;
        s.data().view.overlay = 2;
        s.data().view.opacity = 0.3f;
        s.data().view.fusion = 1;
        s.data().view.discard = 0.9f;
        s.data().view.scale_mode = 2;
        s.data().view.learn = false;  // the workbench (a first launch's default is Learn mode)
        ASSERT_TRUE(s.save()) << s.error();
    }
    int n = 0;
    for (auto& e : fs::directory_iterator(f.parent_path())) { ++n; (void)e; }
    EXPECT_EQ(n, 1);  // only settings.json: the atomic write's temporary is gone
    Settings r(f.string());
    r.load();
    EXPECT_TRUE(r.error().empty()) << r.error();
    EXPECT_EQ(r.data().recent_models, (std::vector<std::string>{"/m/a.safetensors", "vit-b16"}));
    EXPECT_EQ(r.data().recent_images, (std::vector<std::string>{"/i/x.png"}));
    EXPECT_FALSE(r.data().options.affine);
    EXPECT_TRUE(r.data().options.unbiased);
    EXPECT_TRUE(r.data().options.pooling == vit::Pooling::Mean);
    EXPECT_EQ(r.data().view.overlay, 2);
    EXPECT_FLOAT_EQ(r.data().view.opacity, 0.3f);
    EXPECT_EQ(r.data().view.fusion, 1);
    EXPECT_FLOAT_EQ(r.data().view.discard, 0.9f);
    EXPECT_EQ(r.data().view.scale_mode, 2);
    EXPECT_FALSE(r.data().view.learn);
    EXPECT_NE(slurp(f).find("\"pooling\": \"mean\""), std::string::npos) << slurp(f);
    EXPECT_NE(slurp(f).find("\"overlay\": \"rollout\""), std::string::npos);
}

TEST(Settings, RecentListsAreMostRecentFirstWithoutDuplicatesAndCapped) {
    Settings s("/nonexistent/never-written.json");
    for (int i = 0; i < 15; ++i) s.add_recent_image("/i/" + std::to_string(i) + ".png");
    ASSERT_EQ(s.data().recent_images.size(), Settings::kMaxRecent);
    EXPECT_EQ(s.data().recent_images.front(), "/i/14.png");
    EXPECT_EQ(s.data().recent_images.back(), "/i/5.png");
    s.add_recent_image("/i/9.png");  // moves to the front, no duplicate
    EXPECT_EQ(s.data().recent_images.front(), "/i/9.png");
    EXPECT_EQ(std::count(s.data().recent_images.begin(), s.data().recent_images.end(), "/i/9.png"), 1);
    EXPECT_EQ(s.data().recent_images.size(), Settings::kMaxRecent);
    s.add_recent_image("");
    EXPECT_EQ(s.data().recent_images.front(), "/i/9.png");
}

// A Linux file name may hold any byte but '/' and NUL; the settings file is JSON (UTF-8) and its
// reader refuses names with a newline or over 4,096 bytes. A name that could not be written and
// read back is not remembered, so opening such a file neither stops every later save (the JSON
// writer threw on the bytes) nor makes the next launch refuse the whole file.
TEST(Settings, NamesThatCannotBeWrittenBackAreNotRemembered) {
    TempDir t;
    fs::path f = t.p / "settings.json";
    Settings s(f.string());
    s.load();
    s.add_recent_image("/i/ok.png");
    for (std::string odd : {std::string("/i/latin1-\xe9t\xe9.png"), std::string("/i/two\nlines.png"),
                            std::string("/i/") + std::string(5000, 'x') + ".png", std::string("/i/\xc3.png")})
        s.add_recent_image(odd);
    s.add_recent_model("/m/\xff.pth");
    EXPECT_EQ(s.data().recent_images, (std::vector<std::string>{"/i/ok.png"}));
    EXPECT_TRUE(s.data().recent_models.empty());
    s.add_recent_image("/i/caf\xc3\xa9 \xe2\x9c\x93.png");  // UTF-8 is kept
    ASSERT_TRUE(s.save()) << s.error();
    EXPECT_TRUE(s.error().empty()) << s.error();
    Settings r(f.string());
    r.load();
    EXPECT_TRUE(r.error().empty()) << r.error();
    EXPECT_EQ(r.data().recent_images, (std::vector<std::string>{"/i/caf\xc3\xa9 \xe2\x9c\x93.png", "/i/ok.png"}));
    EXPECT_TRUE(r.writable());
}

// A number past double's range ("5E937", found by the settings harness) made the JSON parser
// throw an exception nothing caught: the app ended at every launch. Named, defaults, file kept.
TEST(Settings, NumberOutOfRangeIsReportedNotACrash) {
    TempDir t;
    fs::path f = t.p / "settings.json";
    for (std::string bad : {std::string("5E937"), std::string("{\"version\": 1, \"view\": {\"opacity\": 1e400}}"),
                            std::string("{\"future\": -2e999}")}) {
        spit(f, bad);
        Settings s(f.string());
        s.load();
        EXPECT_NE(s.error().find("settings " + f.string() + ": "), std::string::npos) << s.error();
        EXPECT_NE(s.error().find("out of range"), std::string::npos) << s.error();
        EXPECT_TRUE(s.data() == vit::app::SettingsData{});
        EXPECT_FALSE(s.writable());
        EXPECT_EQ(slurp(f), bad);
    }
}

TEST(Settings, CorruptFileIsReportedAndNeverOverwritten) {
    TempDir t;
    fs::path f = t.p / "settings.json";
    for (std::string bad : {std::string("{\"recent_models\": [\"a\""), std::string("[1, 2]"), std::string("\x89PNG\r\n"),
                            std::string("")}) {
        spit(f, bad);
        Settings s(f.string());
        s.load();
        EXPECT_NE(s.error().find(f.string()), std::string::npos) << s.error();
        EXPECT_TRUE(s.error().find("not valid JSON") != std::string::npos ||
                    s.error().find("not a JSON object") != std::string::npos) << s.error();
        EXPECT_TRUE(s.data() == vit::app::SettingsData{});
        EXPECT_FALSE(s.writable());
        s.add_recent_image("/i/new.png");
        EXPECT_TRUE(s.save());  // nothing to do: writes are off for this session
        EXPECT_EQ(slurp(f), bad);
    }
}

TEST(Settings, BadFieldsNamedAndDefaultedOthersKept) {
    TempDir t;
    fs::path f = t.p / "settings.json";
    const std::string text = R"({"recent_models": ["vit-s16", 7, "x"], "recent_images": "nope",
        "options": {"affine": "yes", "unbiased": true, "pooling": "max"},
        "view": {"overlay": "grad", "opacity": 1.5, "discard": 1.0, "scale": "slice", "learn": 0}})";
    spit(f, text);
    Settings s(f.string());
    s.load();
    const std::string& e = s.error();
    for (const char* field : {"recent_models[1]", "recent_images is not a list", "options.affine", "options.pooling",
                              "view.opacity", "view.discard", "view.learn"})
        EXPECT_NE(e.find(field), std::string::npos) << field << " not named in: " << e;
    EXPECT_EQ(s.data().recent_models, (std::vector<std::string>{"vit-s16", "x"}));
    EXPECT_TRUE(s.data().recent_images.empty());
    EXPECT_TRUE(s.data().options.affine);     // default
    EXPECT_TRUE(s.data().options.unbiased);   // good field kept
    EXPECT_FALSE(s.data().options.pooling.has_value());  // default
    EXPECT_EQ(s.data().view.overlay, 3);
    EXPECT_FLOAT_EQ(s.data().view.opacity, 0.65f);
    EXPECT_FLOAT_EQ(s.data().view.discard, 0.f);
    EXPECT_EQ(s.data().view.scale_mode, 1);
    EXPECT_TRUE(s.data().view.learn);  // default: Learn mode
    EXPECT_FALSE(s.writable());
    s.add_recent_model("vit-b16");
    s.save();
    EXPECT_EQ(slurp(f), text);
}

TEST(Settings, UnknownKeysSurviveARewrite) {
    TempDir t;
    fs::path f = t.p / "settings.json";
    spit(f, R"({"version": 1, "future_feature": {"a": [1, 2]}, "recent_images": ["/i/a.png"]})");
    Settings s(f.string());
    s.load();
    ASSERT_TRUE(s.error().empty()) << s.error();
    s.add_recent_image("/i/b.png");
    ASSERT_TRUE(s.save()) << s.error();
    Settings r(f.string());
    r.load();
    EXPECT_EQ(r.data().recent_images, (std::vector<std::string>{"/i/b.png", "/i/a.png"}));
    EXPECT_NE(slurp(f).find("\"future_feature\""), std::string::npos) << slurp(f);
}

// Issue 23: a file nested 100k-500k levels deep (under the 1 MiB cap) overflowed the stack in
// parse() on every launch. It is refused by name, left as it is, and defaults are used.
TEST(Settings, DeeplyNestedFileIsRefusedNotACrash) {
    TempDir t;
    fs::path f = t.p / "settings.json";
    for (size_t depth : {size_t(33), size_t(100000), size_t(500000)}) {
        for (bool in_object : {false, true}) {
            SCOPED_TRACE(std::to_string(depth) + (in_object ? " under a key" : " at the top"));
            std::string text = in_object ? "{\"future\": " + std::string(depth, '[') + std::string(depth, ']') + "}"
                                         : std::string(depth, '[') + std::string(depth, ']');
            spit(f, text);
            Settings s(f.string());
            s.load();
            EXPECT_NE(s.error().find(f.string()), std::string::npos) << s.error();
            EXPECT_NE(s.error().find("levels deep"), std::string::npos) << s.error();
            EXPECT_TRUE(s.data() == vit::app::SettingsData{});
            EXPECT_FALSE(s.writable());
            s.add_recent_image("/i/new.png");
            EXPECT_TRUE(s.save());
            EXPECT_EQ(slurp(f), text);
        }
    }
    // Brackets inside strings are not nesting.
    Settings q((t.p / "q.json").string());
    EXPECT_TRUE(q.parse("{\"note\": \"" + std::string(1000, '[') + "\\\"\", \"recent_images\": [\"/a\"]}")) << q.error();
    EXPECT_EQ(q.data().recent_images, (std::vector<std::string>{"/a"}));
}

// Unknown keys go back as the text they were, nested values included, and the known ones are rewritten.
TEST(Settings, UnknownKeysKeptAsTextWithoutATree) {
    TempDir t;
    fs::path f = t.p / "settings.json";
    const std::string deep = std::string(30, '[') + "1.50" + std::string(30, ']');
    spit(f, "\xEF\xBB\xBF{\"b\": {\"x\": [1, \"}]\\\"\", 2e3]}, \"recent_models\": [\"vit-s16\"], \"deep\": " + deep +
                ", \"b\": \"second\", \"view\": {\"opacity\": 0.5}}");
    Settings s(f.string());
    s.load();
    ASSERT_TRUE(s.error().empty()) << s.error();
    s.add_recent_model("vit-b16");
    ASSERT_TRUE(s.save()) << s.error();
    const std::string out = slurp(f);
    EXPECT_NE(out.find("\"deep\": " + deep), std::string::npos) << out;    // the text as it was ("1.50", not 1.5)
    EXPECT_NE(out.find("\"b\": \"second\""), std::string::npos) << out;  // the last of a repeated key
    EXPECT_EQ(out.find("\"x\""), std::string::npos) << out;
    Settings r(f.string());
    r.load();
    ASSERT_TRUE(r.error().empty()) << r.error();
    EXPECT_EQ(r.data().recent_models, (std::vector<std::string>{"vit-b16", "vit-s16"}));
    EXPECT_FLOAT_EQ(r.data().view.opacity, 0.5f);
}

TEST(Settings, NotARegularFileOrTooLarge) {
    TempDir t;
    fs::create_directories(t.p / "dir.json");
    Settings d((t.p / "dir.json").string());
    d.load();
    EXPECT_NE(d.error().find("not a regular file"), std::string::npos) << d.error();
    EXPECT_FALSE(d.writable());
    fs::path big = t.p / "big.json";
    spit(big, "[" + std::string(Settings::kMaxFileBytes + 10, ' ') + "]");
    Settings b(big.string());
    b.load();
    EXPECT_NE(b.error().find(big.string()), std::string::npos) << b.error();
    EXPECT_FALSE(b.writable());
}

TEST(Settings, AWriteFailureIsReportedOnceThenWritesStop) {
    TempDir t;
    spit(t.p / "file", "x");
    Settings s((t.p / "file" / "settings.json").string());  // parent is a file: cannot create it
    s.load();
    s.add_recent_image("/i/a.png");
    EXPECT_FALSE(s.save());
    EXPECT_NE(s.error().find("settings not saved"), std::string::npos) << s.error();
    EXPECT_FALSE(s.writable());
}

TEST(Settings, SavesAreThrottledButNotLost) {
    TempDir t;
    fs::path f = t.p / "settings.json";
    Settings s(f.string());
    s.add_recent_image("/i/a.png");
    ASSERT_TRUE(s.save(std::chrono::milliseconds(60000)));  // first write goes through
    s.add_recent_image("/i/b.png");
    ASSERT_TRUE(s.save(std::chrono::milliseconds(60000)));  // too soon: skipped, still dirty
    EXPECT_TRUE(s.dirty());
    EXPECT_EQ(slurp(f).find("/i/b.png"), std::string::npos);
    ASSERT_TRUE(s.save());  // at exit
    EXPECT_NE(slurp(f).find("/i/b.png"), std::string::npos);
}

TEST(Paths, InstalledLayoutThenBuildTreeMarker) {
    TempDir t;
    // installed: <prefix>/bin/vitscope and <prefix>/share/vitscope/samples
    fs::create_directories(t.p / "prefix" / "bin");
    fs::create_directories(t.p / "prefix" / "share" / "vitscope" / "samples");
    auto d = vit::app::data_paths_for((t.p / "prefix" / "bin" / "vitscope").string());
    EXPECT_EQ(d.how, "installed");
    EXPECT_EQ(fs::path(d.samples), fs::canonical(t.p) / "prefix" / "share" / "vitscope" / "samples");
    EXPECT_EQ(fs::path(d.shaders), fs::canonical(t.p) / "prefix" / "share" / "vitscope" / "shaders");
    // build tree: a marker next to the executable names the source tree
    fs::create_directories(t.p / "src" / "assets" / "samples");
    fs::create_directories(t.p / "build");
    spit(t.p / "build" / "vitscope-source-dir", (t.p / "src").string() + "\n");
    d = vit::app::data_paths_for((t.p / "build" / "vitscope").string());
    EXPECT_EQ(d.how, "source tree");
    EXPECT_EQ(fs::path(d.samples), t.p / "src" / "assets" / "samples");
    EXPECT_EQ(fs::path(d.shaders), t.p / "src" / "shaders");
    // neither: nothing found, no guess
    fs::create_directories(t.p / "bare");
    d = vit::app::data_paths_for((t.p / "bare" / "vitscope").string());
    EXPECT_EQ(d.how, "none");
    EXPECT_EQ(d.samples, "");
    // a marker pointing at a tree without assets is ignored
    spit(t.p / "build" / "vitscope-source-dir", (t.p / "bare").string() + "\n");
    EXPECT_EQ(vit::app::data_paths_for((t.p / "build" / "vitscope").string()).how, "none");
}
