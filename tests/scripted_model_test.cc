// A user's own TorchScript model (engine/scripted_model.h): loading and its
// errors, deterministic inputs from an input spec, the loss forms forward may
// return, training it, and pure-bf16 casting. The .pt files are written at
// test time by tests/scripted/make_models.py into $AUTOACCEL_SCRIPTED_MODELS.
#include "engine/scripted_model.h"

#include <c10/util/Exception.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "common/status_matchers.h"
#include "engine/model.h"
#include "spec/input_spec.h"
#include "tests/test_matchers.h"

namespace autoaccel {
namespace {

constexpr int64_t kVocab = 64;  // tests/scripted/make_models.py
constexpr char kLmSpec[] = "input_ids:int64[B,T]<64; labels=input_ids";

std::string ModelPath(const std::string& name) {
  const char* dir = std::getenv("AUTOACCEL_SCRIPTED_MODELS");
  EXPECT_NE(dir, nullptr) << "set AUTOACCEL_SCRIPTED_MODELS to the output directory of "
                             "tests/scripted/make_models.py (ctest does)";
  return std::string(dir == nullptr ? "" : dir) + "/" + name + ".pt";
}

InputSpec Spec(const std::string& text) {
  absl::StatusOr<InputSpec> spec = ParseInputSpec(text);
  EXPECT_THAT(spec, IsOk());
  return spec.ok() ? *spec : InputSpec{};
}

std::unique_ptr<ScriptedModel> LoadOrDie(const std::string& name, const std::string& spec) {
  absl::StatusOr<std::unique_ptr<ScriptedModel>> model =
      ScriptedModel::Load(ModelPath(name), Spec(spec));
  EXPECT_THAT(model, IsOk());
  return model.ok() ? std::move(*model) : nullptr;
}

TEST(ScriptedModelTest, LoadMissingFileIsInvalidArgument) {
  EXPECT_THAT(ScriptedModel::Load("/nonexistent/model.pt", Spec(kLmSpec)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("model_file: cannot load '/nonexistent/model.pt'"),
                             HasSubstr("No such file"))));
}

TEST(ScriptedModelTest, LoadNonTorchScriptFileIsInvalidArgument) {
  const std::string path = ::testing::TempDir() + "/not_a_model.pt";
  std::ofstream(path) << "definitely not a zip archive\n";
  EXPECT_THAT(ScriptedModel::Load(path, Spec(kLmSpec)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model_file: cannot load")));
}

TEST(ScriptedModelTest, LoadChecksForwardArgumentCount) {
  // forward(input_ids, labels) given one input and given three.
  EXPECT_THAT(ScriptedModel::Load(ModelPath("tiny_lm"), Spec("input_ids:int64[B,T]<64")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("model_file: forward"), HasSubstr("takes 2 argument(s)"),
                             HasSubstr("(input_ids, labels)"), HasSubstr("gives 1"))));
  EXPECT_THAT(ScriptedModel::Load(ModelPath("tiny_lm"), Spec(std::string(kLmSpec) + "; x=labels")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("takes 2 argument(s)"), HasSubstr("gives 3"))));
}

TEST(ScriptedModelTest, LoadAllowsDefaultedArgumentsButOnlyTensorsFromTheSpec) {
  // forward(x, y, scale: float = 1.0)
  EXPECT_THAT(ScriptedModel::Load(ModelPath("dict_loss"), Spec("x:float32[B,8]; y:float32[B]")),
              IsOk());
  EXPECT_THAT(
      ScriptedModel::Load(ModelPath("dict_loss"), Spec("x:float32[B,8]")),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("takes 2 to 3 argument(s) (x, y, scale)"), HasSubstr("gives 1"))));
  EXPECT_THAT(
      ScriptedModel::Load(ModelPath("dict_loss"), Spec("x:float32[B,8]; y:float32[B]; s=y")),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("forward argument 'scale'"), HasSubstr("has type float"))));
}

TEST(ScriptedModelTest, LoadRejectsModelWithNothingToTrain) {
  EXPECT_THAT(
      ScriptedModel::Load(ModelPath("frozen"), Spec("x:float32[B,8]")),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no parameter that requires grad")));
}

TEST(ScriptedModelTest, ParametersAreTheTrainableOnes) {
  std::unique_ptr<ScriptedModel> model = LoadOrDie("tiny_lm", kLmSpec);
  ASSERT_NE(model, nullptr);
  // embed 64x32, pos 32x32, block (2 layer norms, qkv, proj, fc, out), ln_f, head 32x64.
  EXPECT_EQ(model->ParameterCount(), 17888);
  EXPECT_EQ(model->Parameters().size(), 17u);  // tensors, in 10 modules
}

TEST(ScriptedModelTest, SameSeedGivesSameInputsWhateverTheGlobalRng) {
  std::unique_ptr<ScriptedModel> model = LoadOrDie("tiny_lm", kLmSpec);
  ASSERT_NE(model, nullptr);
  torch::manual_seed(1);
  std::vector<torch::IValue> a = model->MakeInputs(4, 16, 7, torch::kCPU, std::nullopt);
  torch::manual_seed(2);
  std::vector<torch::IValue> b = model->MakeInputs(4, 16, 7, torch::kCPU, std::nullopt);
  std::vector<torch::IValue> c = model->MakeInputs(4, 16, 8, torch::kCPU, std::nullopt);
  ASSERT_EQ(a.size(), 2u);
  const torch::Tensor ids = a[0].toTensor();
  EXPECT_EQ(ids.sizes(), torch::IntArrayRef({4, 16}));
  EXPECT_EQ(ids.scalar_type(), torch::kLong);
  EXPECT_GE(ids.min().item<int64_t>(), 0);
  EXPECT_LT(ids.max().item<int64_t>(), kVocab);
  EXPECT_TRUE(a[1].toTensor().is_same(ids));  // labels=input_ids is the same tensor
  EXPECT_TRUE(torch::equal(ids, b[0].toTensor()));
  EXPECT_FALSE(torch::equal(ids, c[0].toTensor()));
}

TEST(ScriptedModelTest, FloatAndBoolInputs) {
  std::unique_ptr<ScriptedModel> model = LoadOrDie("dict_loss", "x:float32[B,8]; y:bool[B]");
  ASSERT_NE(model, nullptr);
  std::vector<torch::IValue> f32 = model->MakeInputs(64, 16, 3, torch::kCPU, std::nullopt);
  std::vector<torch::IValue> bf16 = model->MakeInputs(64, 16, 3, torch::kCPU, torch::kBFloat16);
  const torch::Tensor x = f32[0].toTensor(), y = f32[1].toTensor();
  EXPECT_EQ(x.sizes(), torch::IntArrayRef({64, 8}));
  EXPECT_EQ(x.scalar_type(), torch::kFloat);
  EXPECT_NEAR(x.mean().item<double>(), 0.0, 0.2);  // standard normal
  EXPECT_NEAR(x.std().item<double>(), 1.0, 0.2);
  EXPECT_EQ(y.scalar_type(), torch::kBool);
  EXPECT_GT(y.sum().item<int64_t>(), 0);
  EXPECT_LT(y.sum().item<int64_t>(), 64);
  // float_dtype casts the same draws; bool inputs are not floating point.
  EXPECT_EQ(bf16[0].toTensor().scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(bf16[0].toTensor(), x.to(torch::kBFloat16)));
  EXPECT_EQ(bf16[1].toTensor().scalar_type(), torch::kBool);
}

TEST(ScriptedModelTest, TrainingLowersTheLoss) {
  std::unique_ptr<ScriptedModel> model = LoadOrDie("tiny_lm", kLmSpec);
  ASSERT_NE(model, nullptr);
  model->Train();
  torch::optim::AdamW optimizer(model->Parameters(), torch::optim::AdamWOptions(1e-2));
  // One fixed batch: the model can memorise it, so the loss must fall well
  // below its starting value (about ln 64 = 4.16).
  std::vector<torch::IValue> inputs = model->MakeInputs(4, 16, 7, torch::kCPU, std::nullopt);
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = model->Loss(inputs);
    ASSERT_EQ(loss.dim(), 0);
    ASSERT_EQ(loss.scalar_type(), torch::kFloat);
    loss.backward();
    optimizer.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_NEAR(first, std::log(kVocab), 0.5);
  EXPECT_LT(last, 0.7 * first) << "first " << first << " last " << last;
}

TEST(ScriptedModelTest, DictAndTupleReturnsGiveTheLoss) {
  std::unique_ptr<ScriptedModel> dict = LoadOrDie("dict_loss", "x:float32[B,8]; y:float32[B]");
  ASSERT_NE(dict, nullptr);
  torch::Tensor loss = dict->Loss(dict->MakeInputs(4, 16, 1, torch::kCPU, std::nullopt));
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_GT(loss.item<double>(), 0);
  loss.backward();
  for (const torch::Tensor& p : dict->Parameters()) EXPECT_TRUE(p.grad().defined());

  std::unique_ptr<ScriptedModel> tuple = LoadOrDie("tuple_loss", kLmSpec);
  ASSERT_NE(tuple, nullptr);
  loss = tuple->Loss(tuple->MakeInputs(2, 8, 1, torch::kCPU, std::nullopt));
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_NEAR(loss.item<double>(), std::log(kVocab), 0.5);
}

TEST(ScriptedModelTest, NonScalarReturnIsAClearError) {
  std::unique_ptr<ScriptedModel> model = LoadOrDie("bad_return", "input_ids:int64[B,T]<64");
  ASSERT_NE(model, nullptr);
  std::vector<torch::IValue> inputs = model->MakeInputs(2, 8, 1, torch::kCPU, std::nullopt);
  try {
    model->Loss(inputs);
    FAIL() << "Loss accepted logits";
  } catch (const c10::Error& e) {
    EXPECT_THAT(e.what_without_backtrace(),
                AllOf(HasSubstr("forward returned a Tensor of shape [2, 8, 64]"),
                      HasSubstr("expected the loss: a scalar")));
  }
}

TEST(ScriptedModelTest, PureBf16CastsFloatingStateOnly) {
  std::unique_ptr<ScriptedModel> model = LoadOrDie("tiny_lm", kLmSpec);
  ASSERT_NE(model, nullptr);
  const std::vector<torch::Tensor> before = model->Parameters();
  model->To(torch::kCPU, torch::kBFloat16);
  const std::vector<torch::Tensor> after = model->Parameters();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(after[i].is_same(before[i]));  // an optimizer's references stay valid
  }
  for (const auto& buffer : model->module().named_buffers()) {
    EXPECT_EQ(buffer.value.scalar_type(), torch::kLong) << buffer.name;  // the causal mask
  }
  torch::Tensor loss = model->Loss(model->MakeInputs(2, 8, 1, torch::kCPU, torch::kBFloat16));
  EXPECT_EQ(loss.scalar_type(), torch::kFloat);
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
  loss.backward();
  EXPECT_EQ(after[0].grad().scalar_type(), torch::kBFloat16);
}

// The trainer's bf16 strategy wraps the forward in an autocast region: the
// ops inside a scripted forward must follow it like eager ones (linear in
// bf16), on every call, not just while the JIT is still profiling.
TEST(ScriptedModelTest, AutocastReachesInsideTheScriptedForward) {
  std::unique_ptr<ScriptedModel> logits = LoadOrDie("bad_return", "input_ids:int64[B,T]<64");
  ASSERT_NE(logits, nullptr);
  std::vector<torch::IValue> inputs = logits->MakeInputs(2, 8, 1, torch::kCPU, std::nullopt);
  for (int call = 0; call < 4; ++call) {
    AutocastScope autocast(torch::kCPU, true, torch::kBFloat16);
    EXPECT_EQ(logits->module().forward(inputs).toTensor().scalar_type(), torch::kBFloat16)
        << "call " << call;
  }
  torch::NoGradGuard no_grad;  // the executor specialises on grad mode too
  for (int call = 0; call < 4; ++call) {
    AutocastScope autocast(torch::kCPU, true, torch::kBFloat16);
    EXPECT_EQ(logits->module().forward(inputs).toTensor().scalar_type(), torch::kBFloat16)
        << "no_grad call " << call;
  }
  EXPECT_EQ(logits->module().forward(inputs).toTensor().scalar_type(), torch::kFloat);
}

}  // namespace
}  // namespace autoaccel
