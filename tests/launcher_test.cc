// The pure parts of launcher trials: the launchers file an operator writes
// (every mistake refused naming the launcher and the field), placeholder
// expansion, the metrics protocol's lines and the metrics a rank's measured
// steps give, and --devices for other accelerator types.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "tests/subprocess.h"
#include "worker/accelerators.h"
#include "worker/launchers.h"
#include "worker/metrics_file.h"
#include "worker/worker_flags.h"

namespace autoaccel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<Launchers> Parse(const std::string& launcher_json) {
  return ParseLaunchers(absl::StrCat(R"({"launchers": {"hf": )", launcher_json, "}}"), "/etc/ops",
                        "launchers.json");
}

TEST(LaunchersFileTest, AGoodLauncherIsReadWithItsWorkdirResolvedAndAdvertised) {
  absl::StatusOr<Launchers> l = Parse(R"({
    "argv": ["{python}", "train.py", "--output_dir", "{trial_dir}", "{*training_args}"],
    "workdir": "../examples/hf", "env": {"TOKENIZERS_PARALLELISM": "false"},
    "format": "hf-trainer", "dimensions": ["precision", "micro_batch_size"]})");
  ASSERT_THAT(l.status(), IsOk());
  const LauncherDef& def = l->at("hf");
  EXPECT_EQ(def.workdir, "/etc/examples/hf");
  EXPECT_THAT(def.env, ElementsAre(std::make_pair(std::string("TOKENIZERS_PARALLELISM"),
                                                  std::string("false"))));
  const v1::Launcher proto = LauncherToProto(def);
  EXPECT_EQ(proto.name(), "hf");
  EXPECT_EQ(proto.format(), "hf-trainer");
  EXPECT_THAT(proto.dimensions(), ElementsAre("precision", "micro_batch_size"));
  // Minimal: argv only; an absolute workdir stays.
  absl::StatusOr<Launchers> minimal = Parse(R"({"argv": ["/bin/true"], "workdir": "/tmp"})");
  ASSERT_THAT(minimal.status(), IsOk());
  EXPECT_EQ(minimal->at("hf").workdir, "/tmp");
  EXPECT_EQ(minimal->at("hf").format, "");
}

TEST(LaunchersFileTest, EveryMistakeIsRefusedNamingTheLauncherAndTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"("not an object")", "definition: must be a JSON object"},
      {R"({"argv": ["x"], "cmd": "y"})", "cmd: unknown key (allowed: argv, workdir"},
      {R"({"workdir": "/tmp"})", "argv: missing"},
      {R"({"argv": []})", "argv: must be a non-empty list"},
      {R"({"argv": "python train.py"})", "argv: must be a non-empty list"},
      {R"({"argv": ["python", 3]})", "argv[1]: must be a non-empty string"},
      {R"({"argv": ["x"], "workdir": 5})", "workdir: must be a non-empty string"},
      {R"({"argv": ["x"], "env": ["A=b"]})", "env: must be an object"},
      {R"({"argv": ["x"], "env": {"1BAD": "v"}})", "env.1BAD: a variable name is"},
      {R"({"argv": ["x"], "env": {"A": 1}})", "env.A: the value must be a string"},
      {R"({"argv": ["x"], "env": {"RANK": "3"}})", "env.RANK: the worker sets it"},
      {R"({"argv": ["x"], "env": {"MUSA_VISIBLE_DEVICES": "0"}})", "env.MUSA_VISIBLE_DEVICES"},
      {R"({"argv": ["x"], "format": "keras"})", "format: unknown export format 'keras'"},
      {R"({"argv": ["x"], "format": 1})", "format: must be a string"},
      {R"({"argv": ["x"], "dimensions": "precision"})", "dimensions: must be a list"},
      {R"({"argv": ["x"], "dimensions": ["precision", "mbs"]})",
       "dimensions[1]: unknown strategy dimension 'mbs' (allowed: "},
      {R"({"argv": ["x"], "dimensions": ["precision", "precision"]})",
       "dimensions[1]: 'precision' given twice"},
      {R"({"argv": ["x", "--mbs={mbs}"]})", "argv[1]: unknown placeholder {mbs} (known: "},
      {R"({"argv": ["x", "{*training_args}"]})", "argv[1]: {*training_args} expands an exported"},
      {R"({"argv": ["x", "--a={*training_args}"], "format": "hf-trainer"})",
       "argv[1]: '--a={*training_args}': {*NAME} expands to several tokens"},
  };
  for (const auto& [json, message] : cases) {
    EXPECT_THAT(Parse(json).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(absl::StrCat("launchers.json: launcher 'hf': ", message))))
        << json;
  }
}

TEST(LaunchersFileTest, TheFileItselfMustBeALaunchersObject) {
  auto parse = [](const std::string& text) { return ParseLaunchers(text, "/", "l.json").status(); };
  EXPECT_THAT(parse("{"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("l.json")));
  EXPECT_THAT(parse(R"({"hf": {"argv": ["x"]}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected {\"launchers\"")));
  EXPECT_THAT(parse(R"({"launchers": {}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("non-empty object")));
  EXPECT_THAT(parse(R"({"launchers": {"a": {"argv": ["x"]}}, "extra": 1})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown key 'extra'")));
  for (const char* name : {".hidden", "a/b", "sp ace", ""}) {
    EXPECT_THAT(parse(absl::StrCat(R"({"launchers": {")", name, R"(": {"argv": ["x"]}}})")),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(absl::StrCat("launcher '", name, "': bad name"))))
        << name;
  }
  EXPECT_THAT(
      parse(absl::StrCat(R"({"launchers": {")", std::string(65, 'a'), R"(": {"argv": ["x"]}}})")),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad name")));
}

TEST(LaunchersFileTest, ReadingTheFileChecksItExistsAndItsWorkdirsToo) {
  const std::string dir = testing::MakeTempDir("autoaccel-launchers-");
  EXPECT_THAT(ReadLaunchersFile(dir + "/none.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a readable file")));
  testing::WriteFile(dir + "/l.json",
                     R"({"launchers": {"a": {"argv": ["x"], "workdir": "missing"}}})");
  EXPECT_THAT(ReadLaunchersFile(dir + "/l.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("launcher 'a': workdir: ", dir,
                                              "/missing is not a directory"))));
  std::filesystem::create_directory(dir + "/missing");
  absl::StatusOr<Launchers> l = ReadLaunchersFile(dir + "/l.json");
  ASSERT_THAT(l.status(), IsOk());
  EXPECT_EQ(l->at("a").workdir, dir + "/missing");
  std::filesystem::remove_all(dir);
}

TEST(PlaceholderTest, ValuesReplaceInsideTokensAndFilesByStem) {
  LauncherDef def;
  def.name = "hf";
  def.format = "hf-trainer";
  def.argv = {"{python}",
              "--mbs={micro_batch_size}",
              "{deepspeed_config}",
              "{ds_config}",
              "{*training_args}",
              "{not closed",
              "{}",
              "{1x}",
              "a{rank}b{rank}"};
  const std::map<std::string, std::string> values = {
      {"python", "/usr/bin/python3"}, {"micro_batch_size", "4"}, {"rank", "1"}};
  const std::vector<ExportedFile> files = {
      {"training_args.txt", "/t/training_args.txt", "--bf16\n--deepspeed=/t/ds_config.json\n\n"},
      {"ds_config.json", "/t/ds_config.json", "{}"}};
  absl::StatusOr<std::vector<std::string>> argv = ExpandArgv(def, values, files);
  ASSERT_THAT(argv.status(), IsOk());
  EXPECT_THAT(*argv, ElementsAre("/usr/bin/python3", "--mbs=4", "/t/ds_config.json",
                                 "/t/ds_config.json", "--bf16", "--deepspeed=/t/ds_config.json",
                                 "{not closed", "{}", "{1x}", "a1b1"));
}

TEST(PlaceholderTest, AFilePlaceholderThisExportDidNotWriteNamesItAndTheFilesWritten) {
  LauncherDef def;
  def.name = "hf";
  def.format = "hf-trainer";
  def.argv = {"x", "--fsdp={fsdp_config}"};
  const std::vector<ExportedFile> files = {{"training_args.txt", "/t/training_args.txt", ""}};
  EXPECT_THAT(ExpandArgv(def, {}, files).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("{fsdp_config} names no value and no file the hf-trainer export "
                                 "wrote for this strategy (files written: training_args.txt)")));
  def.argv = {"x", "{*megatron_args}"};
  EXPECT_THAT(ExpandArgv(def, {}, files).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("{*megatron_args}")));
}

TEST(PlaceholderTest, EveryStrategyKeyAndWorkerValueIsKnown) {
  const std::vector<std::string>& known = KnownPlaceholders();
  for (const char* name : {"strategy_file",
                           "trial_dir",
                           "metrics_file",
                           "python",
                           "rank",
                           "local_rank",
                           "world_size",
                           "global_batch_size",
                           "seq_len",
                           "warmup_steps",
                           "measured_steps",
                           "micro_batch_size",
                           "grad_accum_steps",
                           "precision",
                           "checkpointing",
                           "checkpoint_percent",
                           "attention",
                           "optimizer",
                           "offload",
                           "data_parallel",
                           "tensor_parallel",
                           "pipeline_parallel",
                           "sharding",
                           "pipeline_schedule",
                           "virtual_stages",
                           "sequence_parallel"}) {
    EXPECT_TRUE(std::binary_search(known.begin(), known.end(), std::string(name))) << name;
  }
}

absl::Status Add(const std::string& line, MetricsLog* log) { return AddMetricsLine(line, log); }

TEST(MetricsLineTest, KnownEventsAreReadAndUnknownOnesIgnored) {
  MetricsLog log;
  ASSERT_THAT(Add(R"({"event": "ready", "seconds": 3.5})", &log), IsOk());
  ASSERT_THAT(Add(R"({"event": "model", "parameters": 124439808})", &log), IsOk());
  ASSERT_THAT(Add(R"({"event": "step", "step": 1, "step_time_s": 0.5, "tokens": 4096,
                      "samples": 8, "loss": 7.1, "peak_memory_bytes": 1000})",
                  &log),
              IsOk());
  ASSERT_THAT(Add(R"({"event": "step", "step": 2, "step_time_s": 1})", &log), IsOk());
  ASSERT_THAT(Add(R"({"event": "checkpoint_saved", "path": "x"})", &log), IsOk());
  ASSERT_THAT(Add("   ", &log), IsOk());
  ASSERT_THAT(Add(R"({"event": "oom", "message": "CUDA out of memory"})", &log), IsOk());
  EXPECT_EQ(log.lines, 7);
  EXPECT_EQ(log.ready_seconds, 3.5);
  EXPECT_EQ(log.parameters, 124439808);
  ASSERT_EQ(log.steps.size(), 2u);
  EXPECT_EQ(log.steps[0].tokens, 4096);
  EXPECT_EQ(log.steps[0].loss, 7.1);
  EXPECT_EQ(log.steps[0].peak_memory_bytes, 1000);
  EXPECT_EQ(log.steps[1].step_time_s, 1.0);
  EXPECT_FALSE(log.steps[1].tokens.has_value());
  EXPECT_EQ(log.oom, "CUDA out of memory");
}

TEST(MetricsLineTest, ABadLineIsRefusedWithItsNumberTheReasonAndTheLine) {
  const std::pair<std::string, std::string> cases[] = {
      {"step 3 took 0.4s", "not JSON"},
      {"[1, 2]", "not a JSON object"},
      {R"({"step": 1})", "no string \"event\""},
      {R"({"event": 3})", "no string \"event\""},
      {R"({"event": "step", "step_time_s": 0.1})", "step event: \"step\" missing"},
      {R"({"event": "step", "step": 0, "step_time_s": 0.1})", "\"step\" must be an integer >= 1"},
      {R"({"event": "step", "step": 1.5, "step_time_s": 0.1})", "\"step\" must be an integer"},
      {R"({"event": "step", "step": 1})", "\"step_time_s\" missing"},
      {R"({"event": "step", "step": 1, "step_time_s": 0})", "\"step_time_s\" must be a number > 0"},
      {R"({"event": "step", "step": 1, "step_time_s": "0.1"})", "\"step_time_s\" must be"},
      {R"({"event": "step", "step": 1, "step_time_s": 0.1, "tokens": -1})",
       "\"tokens\" must be an integer >= 0"},
      {R"({"event": "step", "step": 1, "step_time_s": 0.1, "samples": 2.5})", "\"samples\""},
      {R"({"event": "step", "step": 1, "step_time_s": 0.1, "loss": "nan"})", "\"loss\""},
      {R"({"event": "oom", "message": 5})", "oom event: \"message\" must be a string"},
      {R"({"event": "model"})", "model event: \"parameters\" missing"},
      {R"({"event": "ready", "seconds": -1})", "ready event: \"seconds\" must be a number >= 0"},
  };
  for (const auto& [line, why] : cases) {
    MetricsLog log;
    ASSERT_THAT(Add(R"({"event": "ready", "seconds": 1})", &log), IsOk());
    const absl::Status s = Add(line, &log);
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("metrics file line 2: ")))
        << line;
    EXPECT_THAT(s.message(), HasSubstr(why)) << line;
    EXPECT_THAT(Add(line, &log).message(), HasSubstr(line.substr(0, 10))) << line;
    EXPECT_EQ(log.lines, 1) << "a refused line leaves the log as it was";
    EXPECT_TRUE(log.steps.empty());
  }
  MetricsLog log;
  EXPECT_THAT(Add(std::string(500, 'x'), &log).message(), HasSubstr(std::string(200, 'x') + "..."));
  EXPECT_THAT(Add(std::string(500, 'x'), &log).message(),
              ::testing::Not(HasSubstr(std::string(201, 'x'))));
}

TEST(MetricsFileReaderTest, ReadsOnlyCompleteLinesAsTheyAreAppended) {
  const std::string dir = testing::MakeTempDir("autoaccel-metrics-");
  const std::string path = dir + "/metrics.jsonl";
  MetricsFileReader reader(path);
  EXPECT_THAT(reader.Poll(), IsOk());  // not there yet
  testing::WriteFile(path, R"({"event": "step", "step": 1, "step_time_s": 0.1}
{"event": "step", "step": 2, "step_)");
  ASSERT_THAT(reader.Poll(), IsOk());
  EXPECT_EQ(reader.log().steps.size(), 1u);
  testing::WriteFile(path, R"({"event": "step", "step": 1, "step_time_s": 0.1}
{"event": "step", "step": 2, "step_time_s": 0.2}
garbage
)");
  EXPECT_THAT(reader.Poll(), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("metrics file line 3: not JSON: garbage")));
  EXPECT_EQ(reader.log().steps.size(), 2u);
  EXPECT_THAT(reader.Poll(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 3")));
  std::filesystem::remove_all(dir);
}

MetricsLog Steps(const std::vector<double>& times, int64_t tokens) {
  MetricsLog log;
  for (size_t i = 0; i < times.size(); ++i) {
    StepEvent s;
    s.step = static_cast<int64_t>(i + 1);
    s.step_time_s = times[i];
    if (tokens > 0) s.tokens = tokens;
    s.loss = 10.0 - static_cast<double>(i);
    log.steps.push_back(s);
  }
  return log;
}

TEST(RankMetricsTest, MeasuredStepsAreThoseAfterWarmUp) {
  // Two warm-up steps (slow), five measured: 1, 2, 3, 4, 100 (an outlier).
  MetricsLog log = Steps({9, 9, 1, 2, 3, 4, 100, 50}, 1000);
  log.steps[3].peak_memory_bytes = 5000;
  RankMetricsInput in;
  in.warmup_steps = 2;
  in.measured_steps = 5;
  in.world_size = 2;
  in.flops_per_token = 1e9;
  in.device_peak_tflops = 0.5;
  in.peak_rss_bytes = 7000;
  const TrialMetrics m = RankMetrics(log, in);
  EXPECT_EQ(m.measured_steps, 5);
  EXPECT_DOUBLE_EQ(m.step_time_median_s, 3);
  EXPECT_DOUBLE_EQ(m.step_time_min_s, 1);
  EXPECT_DOUBLE_EQ(m.step_time_max_s, 100);
  EXPECT_DOUBLE_EQ(m.step_time_spread, (100 - 1) / 3.0);
  EXPECT_DOUBLE_EQ(m.tokens_per_second, 1000 / 3.0);
  EXPECT_DOUBLE_EQ(m.final_loss, 3);  // the last reported loss (step 8)
  EXPECT_EQ(m.peak_memory_bytes, 5000);
  EXPECT_EQ(m.peak_rss_bytes, 7000);
  EXPECT_DOUBLE_EQ(m.achieved_tflops, 1e9 * (1000 / 3.0) / 1e12);
  EXPECT_DOUBLE_EQ(m.peak_tflops, 1.0);
  EXPECT_DOUBLE_EQ(m.mfu, m.achieved_tflops / 1.0);
}

TEST(RankMetricsTest, WithoutAModelConfigTheModelEventGivesTheFlops) {
  MetricsLog log = Steps({2, 2}, 0);
  log.parameters = 1000000;
  RankMetricsInput in;
  in.warmup_steps = 0;
  in.measured_steps = 2;
  in.global_batch_size = 4;
  in.seq_len = 8;
  in.peak_rss_bytes = 123;
  const TrialMetrics m = RankMetrics(log, in);
  EXPECT_DOUBLE_EQ(m.tokens_per_second, 32 / 2.0);  // no tokens reported: gbs x seq_len
  EXPECT_DOUBLE_EQ(m.samples_per_second, 2);
  EXPECT_DOUBLE_EQ(m.achieved_tflops, 6e6 * 16 / 1e12);
  EXPECT_EQ(m.mfu, 0);                  // peak unknown
  EXPECT_EQ(m.peak_memory_bytes, 123);  // none reported: the measured RSS
  MetricsLog none;
  EXPECT_EQ(RankMetrics(none, in).measured_steps, 0);
}

TEST(AcceleratorDevicesTest, OtherAcceleratorTypesAreDevicesWithTheirOrdinals) {
  absl::StatusOr<std::vector<v1::Device>> musa = ParseDevices("musa:0-2,5", int64_t{32} << 30);
  ASSERT_THAT(musa.status(), IsOk());
  ASSERT_EQ(musa->size(), 4u);
  EXPECT_EQ((*musa)[3].type(), "musa");
  EXPECT_EQ((*musa)[3].name(), "musa:5");
  EXPECT_EQ((*musa)[3].index(), 3);
  EXPECT_EQ((*musa)[3].memory_bytes(), int64_t{32} << 30);
  for (const char* bad : {"musa:", "musa:3-1", "musa:0,0", "tpu:0", "xpu:a"}) {
    EXPECT_THAT(ParseDevices(bad, 0).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("musa, xpu")))
        << bad;
  }
  EXPECT_EQ(FindAcceleratorType("xpu")->visible_devices, "ZE_AFFINITY_MASK");
  // A rank's devices, through what the worker itself was shown.
  EXPECT_EQ(VisibleDevicesValue({4, 6}, nullptr), "4,6");
  EXPECT_EQ(VisibleDevicesValue({1, 0}, "2, 3"), "3,2");
  EXPECT_EQ(VisibleDevicesValue({0, 5}, "GPU-abc,GPU-def"), "GPU-abc,5");
  EXPECT_EQ(FindAcceleratorType("cpu"), nullptr);
}

}  // namespace
}  // namespace autoaccel
