#include "engine/weights.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace autoaccel {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; this reads and writes it as the host's bytes");

constexpr std::pair<const char*, c10::ScalarType> kDtypes[] = {
    {"F64", torch::kDouble},    {"F32", torch::kFloat}, {"F16", torch::kHalf},
    {"BF16", torch::kBFloat16}, {"I64", torch::kLong},  {"I32", torch::kInt},
    {"I16", torch::kShort},     {"I8", torch::kChar},   {"U8", torch::kByte},
    {"BOOL", torch::kBool},
};

const char* DtypeName(c10::ScalarType type) {
  for (const auto& [name, value] : kDtypes) {
    if (value == type) return name;
  }
  return nullptr;
}

std::string Shape(torch::IntArrayRef sizes) {
  return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]");
}

// "a, b, c" or "a, b, c and 4 more".
std::string Some(const std::vector<std::string>& names) {
  constexpr size_t kShown = 5;
  if (names.size() <= kShown) return absl::StrJoin(names, ", ");
  return absl::StrCat(absl::StrJoin(names.begin(), names.begin() + kShown, ", "), " and ",
                      names.size() - kShown, " more");
}

}  // namespace

absl::StatusOr<NamedTensors> ReadSafetensors(const std::string& path,
                                             std::map<std::string, std::string>* metadata) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("weights ", path, ": cannot open"));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights ", path, ": not a safetensors file (", what, ")"));
  };
  if (bytes.size() < 8) return bad("shorter than its 8-byte header length");
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  if (header_size > bytes.size() - 8) return bad("header length past the end of the file");
  const nlohmann::json header = nlohmann::json::parse(
      bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_size), nullptr,
      /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return bad("header is not a JSON object");
  const char* data = bytes.data() + 8 + header_size;
  const uint64_t data_size = bytes.size() - 8 - header_size;

  NamedTensors tensors;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (metadata != nullptr && entry.is_object()) {
        for (const auto& [key, value] : entry.items()) {
          if (value.is_string()) (*metadata)[key] = value.get<std::string>();
        }
      }
      continue;
    }
    auto bad_tensor = [&](absl::string_view what) { return bad(absl::StrCat(name, ": ", what)); };
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() ||
        !entry.contains("shape") || !entry["shape"].is_array() || !entry.contains("data_offsets") ||
        !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2) {
      return bad_tensor("expected {dtype, shape, data_offsets}");
    }
    std::optional<c10::ScalarType> dtype;
    for (const auto& [dtype_name, value] : kDtypes) {
      if (entry["dtype"] == dtype_name) dtype = value;
    }
    if (!dtype) return bad_tensor(absl::StrCat("unsupported dtype ", entry["dtype"].dump()));
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    for (const auto& dim : entry["shape"]) {
      if (!dim.is_number_unsigned() || dim.get<uint64_t>() > (uint64_t{1} << 40)) {
        return bad_tensor("shape entries must be non-negative integers");
      }
      shape.push_back(dim.get<int64_t>());
      numel *= dim.get<uint64_t>();
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      return bad_tensor("data_offsets must be non-negative integers");
    }
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end > data_size) return bad_tensor("data_offsets outside the data");
    const uint64_t nbytes = numel * c10::elementSize(*dtype);
    if (end - begin != nbytes) {
      return bad_tensor(absl::StrCat("data_offsets span ", end - begin, " bytes, shape ",
                                     Shape(shape), " needs ", nbytes));
    }
    torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(*dtype));
    if (nbytes > 0) std::memcpy(t.data_ptr(), data + begin, nbytes);
    tensors.emplace_back(name, std::move(t));
  }
  return tensors;
}

absl::Status WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> contiguous;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const char* dtype = DtypeName(tensor.scalar_type());
    if (dtype == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("weights ", path, ": ", name,
                                                     " has unsupported dtype ",
                                                     c10::toString(tensor.scalar_type())));
    }
    if (name == "__metadata__" || header.contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("weights ", path, ": tensor name '", name, "' repeated or reserved"));
    }
    contiguous.push_back(tensor.detach().to(torch::kCPU).contiguous());
    const uint64_t nbytes = contiguous.back().nbytes();
    header[name] = {{"dtype", dtype},
                    {"shape", contiguous.back().sizes().vec()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_size = text.size();

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&header_size), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const torch::Tensor& t : contiguous) {
      out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    }
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return absl::InternalError(absl::StrCat("weights ", path, ": cannot write ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat("weights ", path, ": cannot rename ", tmp));
  }
  return absl::OkStatus();
}

absl::Status LoadWeights(torch::nn::Module& module, const std::string& path) {
  absl::StatusOr<NamedTensors> file = ReadSafetensors(path);
  if (!file.ok()) return file.status();
  std::map<std::string, const torch::Tensor*> by_name;
  for (const auto& [name, tensor] : *file) by_name[name] = &tensor;

  // Buffers too (deepseek_v3's e_score_correction_bias), as transformers'
  // state_dict holds them.
  std::vector<std::pair<std::string, torch::Tensor>> params;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    params.emplace_back(item.key(), item.value());
  }
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    params.emplace_back(item.key(), item.value());
  }
  std::vector<std::string> missing, other_shape, unexpected;
  std::set<std::string> used;
  for (const auto& [name, value] : params) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      missing.push_back(name);
      continue;
    }
    used.insert(name);
    const torch::Tensor& t = *it->second;
    if (t.sizes() != value.sizes() || t.is_floating_point() != value.is_floating_point()) {
      other_shape.push_back(absl::StrCat(name, " (file ", DtypeName(t.scalar_type()), " ",
                                         Shape(t.sizes()), ", model ", Shape(value.sizes()), ")"));
    }
  }
  for (const auto& [name, tensor] : by_name) {
    if (used.count(name) == 0) unexpected.push_back(name);
  }
  if (!missing.empty() || !other_shape.empty() || !unexpected.empty()) {
    std::vector<std::string> problems;
    if (!missing.empty()) {
      problems.push_back(absl::StrCat(missing.size(), " parameter(s) missing: ", Some(missing)));
    }
    if (!other_shape.empty()) {
      problems.push_back(
          absl::StrCat(other_shape.size(), " of another shape: ", Some(other_shape)));
    }
    if (!unexpected.empty()) {
      problems.push_back(
          absl::StrCat(unexpected.size(), " tensor(s) that name no parameter: ", Some(unexpected)));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("weights ", path, ": ", absl::StrJoin(problems, "; ")));
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, value] : params) value.copy_(*by_name.at(name));
  return absl::OkStatus();
}

}  // namespace autoaccel
