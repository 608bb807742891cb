#include "engine/scripted_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>

#include <exception>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace autoaccel {
namespace {

c10::ScalarType ToScalarType(InputDtype dtype) {
  switch (dtype) {
    case InputDtype::kInt64:
      return torch::kLong;
    case InputDtype::kInt32:
      return torch::kInt;
    case InputDtype::kFloat32:
      return torch::kFloat;
    case InputDtype::kBfloat16:
      return torch::kBFloat16;
    case InputDtype::kFloat16:
      return torch::kHalf;
    case InputDtype::kBool:
      return torch::kBool;
  }
  return torch::kFloat;
}

std::string DescribeTensor(const torch::Tensor& t) {
  std::ostringstream os;
  os << "a Tensor of shape " << t.sizes() << " and dtype " << t.scalar_type();
  return os.str();
}

// What forward returned, for the error message when it is not a loss.
std::string Describe(const torch::IValue& v) {
  if (v.isTensor()) return DescribeTensor(v.toTensor());
  return absl::StrCat("a value of type ", v.type()->repr_str());
}

bool IsLossTensor(const torch::IValue& v) {
  if (!v.isTensor()) return false;
  const torch::Tensor& t = v.toTensor();
  return t.defined() && t.dim() == 0 && t.is_floating_point();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ScriptedModel>> ScriptedModel::Load(const std::string& path,
                                                                   const InputSpec& spec) {
  torch::jit::Module module;
  try {
    // Onto the CPU whatever device it was saved from; To() moves it later.
    module = torch::jit::load(path, torch::Device(torch::kCPU));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model_file: cannot load '", path, "' as TorchScript: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_file: cannot load '", path, "' as TorchScript: ", e.what()));
  }

  bool trainable = false;
  for (const torch::Tensor& p : module.parameters()) trainable |= p.requires_grad();
  if (!trainable) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_file: '", path,
                     "' has no parameter that requires grad, so there is nothing to "
                     "train (save the module with its nn.Parameters, requires_grad=True)"));
  }

  std::optional<torch::jit::Method> forward = module.find_method("forward");
  if (!forward) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_file: '", path, "' has no forward method"));
  }
  const c10::FunctionSchema& schema = forward->function().getSchema();
  // The first argument is self.
  std::vector<std::string> names;
  size_t required = 0;
  for (size_t i = 1; i < schema.arguments().size(); ++i) {
    const c10::Argument& arg = schema.arguments()[i];
    names.push_back(arg.name());
    if (!arg.default_value()) required = names.size();
  }
  const size_t given = spec.inputs.size();
  if (given < required || given > names.size()) {
    std::string takes = required == names.size() ? absl::StrCat(names.size())
                                                 : absl::StrCat(required, " to ", names.size());
    return absl::InvalidArgumentError(
        absl::StrCat("model_file: forward of '", path, "' takes ", takes, " argument(s) (",
                     absl::StrJoin(names, ", "), ") but input_spec gives ", given, " (",
                     InputSpecToText(spec), ")"));
  }
  for (size_t i = 0; i < given; ++i) {
    const c10::Argument& arg = schema.arguments()[i + 1];
    if (!c10::TensorType::get()->isSubtypeOf(*arg.type())) {
      return absl::InvalidArgumentError(
          absl::StrCat("model_file: forward argument '", arg.name(), "' of '", path, "' has type ",
                       arg.type()->repr_str(), " but input_spec gives it a tensor ('",
                       spec.inputs[i].name, "')"));
    }
  }

  module.train(true);
  return std::unique_ptr<ScriptedModel>(new ScriptedModel(std::move(module), spec));
}

std::vector<torch::Tensor> ScriptedModel::Parameters() const {
  std::vector<torch::Tensor> params;
  for (const torch::Tensor& p : module_.parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  return params;
}

int64_t ScriptedModel::ParameterCount() const {
  int64_t n = 0;
  for (const torch::Tensor& p : Parameters()) n += p.numel();
  return n;
}

void ScriptedModel::To(torch::Device device, std::optional<c10::ScalarType> dtype) {
  torch::NoGradGuard no_grad;
  auto convert = [&](const torch::Tensor& t) {
    return dtype && t.is_floating_point() ? t.to(device, *dtype) : t.to(device);
  };
  // set_data rather than a new tensor: the parameter objects (and anyone
  // holding them) stay valid. torch::jit::Module::to would do the same but
  // would cast integer buffers too.
  for (torch::Tensor p : module_.parameters()) {
    p.set_data(convert(p));
    if (p.grad().defined()) p.mutable_grad() = convert(p.grad());
  }
  for (const torch::Tensor& b : module_.buffers()) b.set_data(convert(b));
}

void ScriptedModel::Train(bool on) { module_.train(on); }

std::vector<torch::IValue> ScriptedModel::MakeInputs(
    int64_t batch, int64_t seq_len, uint64_t seed, torch::Device device,
    std::optional<c10::ScalarType> float_dtype) const {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<torch::Tensor> tensors;
  tensors.reserve(spec_.inputs.size());
  for (const InputTensorSpec& input : spec_.inputs) {
    if (input.is_alias()) {
      size_t i = 0;
      while (spec_.inputs[i].name != input.alias_of) ++i;  // ParseInputSpec checked it is earlier
      tensors.push_back(tensors[i]);
      continue;
    }
    std::vector<int64_t> shape = ResolveShape(input, batch, seq_len);
    torch::Tensor t;
    if (IsIntegerDtype(input.dtype)) {
      t = torch::randint(0, input.high, shape, gen, torch::dtype(ToScalarType(input.dtype)));
    } else if (input.dtype == InputDtype::kBool) {
      t = torch::randint(0, 2, shape, gen, torch::dtype(torch::kLong)).to(torch::kBool);
    } else {
      t = torch::randn(shape, gen, torch::dtype(torch::kFloat))
              .to(float_dtype.value_or(ToScalarType(input.dtype)));
    }
    tensors.push_back(t.to(device));
  }
  return std::vector<torch::IValue>(tensors.begin(), tensors.end());
}

torch::Tensor ScriptedModel::Loss(const std::vector<torch::IValue>& inputs) {
  torch::IValue out = module_.forward(inputs);
  torch::IValue loss;
  std::string what;  // set when `out` is a container but not a valid one
  if (out.isTuple() || out.isList()) {
    std::vector<torch::IValue> elements =
        out.isTuple() ? out.toTupleRef().elements().vec() : out.toList().vec();
    if (!elements.empty()) {
      loss = elements[0];
      what = absl::StrCat(Describe(out), " whose first element is ", Describe(loss));
    } else {
      what = absl::StrCat("an empty ", out.isTuple() ? "tuple" : "list");
    }
  } else if (out.isGenericDict()) {
    c10::impl::GenericDict dict = out.toGenericDict();
    auto it = dict.find(torch::IValue("loss"));
    if (it != dict.end()) {
      loss = it->value();
      what = absl::StrCat(Describe(out), " whose \"loss\" is ", Describe(loss));
    } else {
      std::vector<std::string> keys;
      for (const auto& entry : dict) {
        std::ostringstream os;
        os << entry.key();
        keys.push_back(os.str());
      }
      what = absl::StrCat(Describe(out),
                          " without the key \"loss\" (keys: ", absl::StrJoin(keys, ", "), ")");
    }
  } else {
    loss = out;
    what = Describe(out);
  }
  TORCH_CHECK(IsLossTensor(loss), "forward returned ", what,
              "; expected the loss: a scalar (0-dimensional) floating-point tensor, a tuple or "
              "list whose first element is one, or a dict with the key \"loss\" holding one");
  return loss.toTensor().to(torch::kFloat);
}

}  // namespace autoaccel
