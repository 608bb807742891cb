#include "server/request_limits.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "proto/convert.h"
#include "spec/trial.h"

namespace autoaccel {
namespace {

// Fields with a row of their own, left out of the generic walk.
bool HasOwnRow(absl::string_view name) {
  return name == "model.config_json" || name == "model.script" || name == "model.overrides" ||
         name == "model.new_overrides" || name == "launcher" || name == "device_type" ||
         name == "device_catalog_json";
}

// "value unit" with integers printed as integers.
std::string WithUnit(double value, absl::string_view unit) {
  std::string v = std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e18
                      ? absl::StrCat(static_cast<int64_t>(value))
                      : absl::StrFormat("%g", value);
  return unit.empty() ? v : absl::StrCat(v, " ", unit);
}

// Every string and repeated field of `m` (recursively), but those with a
// row of their own: text at most kTextBytes, lists at most kListEntries.
absl::Status CheckFieldSizes(const google::protobuf::Message& m, const std::string& prefix) {
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  const google::protobuf::Reflection* reflection = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    const std::string name = absl::StrCat(prefix, f->name());
    if (HasOwnRow(name)) continue;
    const bool text = f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING;
    if (f->is_repeated()) {
      const int n = reflection->FieldSize(m, f);
      RETURN_IF_ERROR(CheckLimit(Limit::kListEntries, n, name));
      for (int j = 0; text && j < n; ++j) {
        RETURN_IF_ERROR(CheckLimit(
            Limit::kTextBytes,
            static_cast<double>(reflection->GetRepeatedStringReference(m, f, j, nullptr).size()),
            absl::StrCat(name, "[", j, "]")));
      }
    } else if (text) {
      std::string scratch;
      RETURN_IF_ERROR(CheckLimit(
          Limit::kTextBytes,
          static_cast<double>(reflection->GetStringReference(m, f, &scratch).size()), name));
    } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE &&
               reflection->HasField(m, f)) {
      RETURN_IF_ERROR(CheckFieldSizes(reflection->GetMessage(m, f), name + "."));
    }
  }
  return absl::OkStatus();
}

// The first control character of `text` (C0, DEL, or C1 as UTF-8 encodes
// it), as an error naming `field`; OK when there is none.
absl::Status CheckPrintable(absl::string_view text, const std::string& field) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    unsigned code = 0x100;  // none
    if (c < 0x20 || c == 0x7f) {
      code = c;
    } else if (c == 0xc2 && i + 1 < text.size()) {
      const unsigned char next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9f) code = 0x80 + (next - 0x80);  // U+0080..U+009F
    }
    if (code != 0x100) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: control character U+%04X at byte %d; only printable characters are allowed "
          "(the coordinator logs it and `autoaccel workers` prints it)",
          field, code, i));
    }
  }
  return absl::OkStatus();
}

// CheckPrintable of every string field of `m`, nested and repeated messages
// too (walked by reflection, so a field added to the message is covered).
absl::Status CheckAllPrintable(const google::protobuf::Message& m, const std::string& prefix) {
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  const google::protobuf::Reflection* reflection = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    const std::string name = absl::StrCat(prefix, f->name());
    const bool text = f->type() == google::protobuf::FieldDescriptor::TYPE_STRING;
    const bool message = f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE;
    if (f->is_repeated()) {
      for (int j = 0; j < reflection->FieldSize(m, f); ++j) {
        const std::string at = absl::StrCat(name, "[", j, "]");
        if (text) {
          RETURN_IF_ERROR(
              CheckPrintable(reflection->GetRepeatedStringReference(m, f, j, nullptr), at));
        } else if (message) {
          RETURN_IF_ERROR(CheckAllPrintable(reflection->GetRepeatedMessage(m, f, j), at + "."));
        }
      }
    } else if (text) {
      std::string scratch;
      RETURN_IF_ERROR(CheckPrintable(reflection->GetStringReference(m, f, &scratch), name));
    } else if (message && reflection->HasField(m, f)) {
      RETURN_IF_ERROR(CheckAllPrintable(reflection->GetMessage(m, f), name + "."));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckJsonText(absl::string_view text, Limit bytes, const std::string& field) {
  RETURN_IF_ERROR(CheckLimit(bytes, static_cast<double>(text.size()), field));
  return CheckLimit(Limit::kJsonDepth, JsonNestingDepth(text), field);
}

absl::Status CheckModelRequest(const v1::ModelSpec& m) {
  RETURN_IF_ERROR(CheckJsonText(m.config_json(), Limit::kModelConfigBytes, "model_config"));
  RETURN_IF_ERROR(
      CheckLimit(Limit::kModelFileBytes, static_cast<double>(m.script().size()), "model_file"));
  RETURN_IF_ERROR(CheckLimit(Limit::kOverrides, m.overrides_size() + m.new_overrides_size()));
  // override[i] counts through overrides, then new_overrides (as
  // ModelFromRequest does).
  int i = 0;
  for (const auto* list : {&m.overrides(), &m.new_overrides()}) {
    for (const std::string& text : *list) {
      RETURN_IF_ERROR(
          CheckJsonText(text, Limit::kOverrideBytes, absl::StrCat("override[", i, "]")));
      ++i;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTuneNumbers(const v1::TuneRequest& r) {
  RETURN_IF_ERROR(CheckLimit(Limit::kTimeLimitSeconds, r.time_limit_seconds()));
  RETURN_IF_ERROR(CheckLimit(Limit::kTrialTimeoutSeconds, r.trial_timeout_seconds()));
  RETURN_IF_ERROR(CheckLimit(Limit::kSteps, r.warmup_steps(), "warmup_steps"));
  RETURN_IF_ERROR(CheckLimit(Limit::kSteps, r.measured_steps(), "measured_steps"));
  RETURN_IF_ERROR(CheckLimit(Limit::kMinMeasuredSeconds, r.min_measured_seconds()));
  RETURN_IF_ERROR(CheckLimit(Limit::kConfirmTolerance, r.confirm_tolerance()));
  RETURN_IF_ERROR(CheckLimit(Limit::kMaxTrials, r.max_trials()));
  RETURN_IF_ERROR(CheckLimit(Limit::kWorldSize, r.world_size()));
  RETURN_IF_ERROR(CheckLimit(Limit::kSeqLen, r.seq_len()));
  return CheckLimit(Limit::kGlobalBatchSize, r.global_batch_size());
}

// A model dimension: its row, its gpt2 config key (the other families use
// the row's, or `key`) and the member that holds it.
struct ModelDimension {
  Limit limit;
  const char* gpt2_key;  // null: gpt2 has no such key
  int ModelSpec::*member;
  const char* key = nullptr;  // the config key, when not the row's field
};
constexpr ModelDimension kModelDimensions[] = {
    {Limit::kLayers, "n_layer", &ModelSpec::n_layer},
    {Limit::kHidden, "n_embd", &ModelSpec::n_embd},
    {Limit::kHeads, "n_head", &ModelSpec::n_head},
    {Limit::kHeadDim, nullptr, &ModelSpec::head_dim},
    {Limit::kMlpWidth, "n_inner", &ModelSpec::n_inner},
    {Limit::kVocabulary, "vocab_size", &ModelSpec::vocab_size},
    {Limit::kPositions, "n_positions", &ModelSpec::n_positions},
    {Limit::kExperts, nullptr, &ModelSpec::num_local_experts},
    {Limit::kExpertWidth, nullptr, &ModelSpec::moe_intermediate_size},
    {Limit::kLatentRank, nullptr, &ModelSpec::kv_lora_rank},
    {Limit::kLatentRank, nullptr, &ModelSpec::q_lora_rank, "q_lora_rank"},
    {Limit::kHeadDim, nullptr, &ModelSpec::qk_nope_head_dim, "qk_nope_head_dim"},
    {Limit::kHeadDim, nullptr, &ModelSpec::qk_rope_head_dim, "qk_rope_head_dim"},
    {Limit::kHeadDim, nullptr, &ModelSpec::v_head_dim, "v_head_dim"},
};

absl::Status CheckDevice(const v1::Device& d, int i) {
  const std::string at = absl::StrCat("devices[", i, "]");
  RETURN_IF_ERROR(
      CheckLimit(Limit::kDeviceTypeBytes, static_cast<double>(d.type().size()), at + ".type"));
  RETURN_IF_ERROR(CheckLimit(Limit::kDeviceIndex, d.index(), at + ".index"));
  RETURN_IF_ERROR(
      CheckLimit(Limit::kDeviceNameBytes, static_cast<double>(d.name().size()), at + ".name"));
  RETURN_IF_ERROR(CheckLimit(Limit::kDeviceMemoryBytes, static_cast<double>(d.memory_bytes()),
                             at + ".memory_bytes"));
  RETURN_IF_ERROR(CheckLimit(Limit::kTextBytes, static_cast<double>(d.held_by_trial().size()),
                             at + ".held_by_trial"));
  const PeakTflops peak = FromProto(d.peak_tflops());
  for (const PeakTflopsField& f : kPeakTflopsFields) {
    RETURN_IF_ERROR(CheckLimit(Limit::kDevicePeakTflops, peak.*f.member,
                               absl::StrCat(at, ".peak_tflops.", f.name)));
  }
  return absl::OkStatus();
}

absl::Status CheckLauncher(const v1::Launcher& l, int i) {
  const std::string at = absl::StrCat("launchers[", i, "]");
  RETURN_IF_ERROR(
      CheckLimit(Limit::kLauncherNameBytes, static_cast<double>(l.name().size()), at + ".name"));
  RETURN_IF_ERROR(CheckLimit(Limit::kLauncherFormatBytes, static_cast<double>(l.format().size()),
                             at + ".format"));
  RETURN_IF_ERROR(CheckLimit(Limit::kLauncherDimensions, l.dimensions_size(), at + ".dimensions"));
  for (int j = 0; j < l.dimensions_size(); ++j) {
    RETURN_IF_ERROR(CheckLimit(Limit::kLauncherFormatBytes,
                               static_cast<double>(l.dimensions(j).size()),
                               absl::StrCat(at, ".dimensions[", j, "]")));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckLimit(Limit limit, double value, absl::string_view field) {
  const RequestLimit& row = LimitRow(limit);
  const absl::string_view name = field.empty() ? absl::string_view(row.field) : field;
  if (!std::isfinite(value) || value < static_cast<double>(row.min)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", WithUnit(value, row.unit), ", must be between ", row.min, " and ", row.max));
  }
  if (value > static_cast<double>(row.max)) {
    return absl::Status(row.over, absl::StrCat(name, ": ", WithUnit(value, row.unit), ", at most ",
                                               row.max, " allowed"));
  }
  return absl::OkStatus();
}

absl::Status CheckTuneRequestLimits(const v1::TuneRequest& r) {
  RETURN_IF_ERROR(CheckModelRequest(r.model()));
  RETURN_IF_ERROR(
      CheckLimit(Limit::kLauncherNameBytes, static_cast<double>(r.launcher().size()), "launcher"));
  RETURN_IF_ERROR(CheckLimit(Limit::kDeviceTypeBytes, static_cast<double>(r.device_type().size()),
                             "device_type"));
  RETURN_IF_ERROR(CheckFieldSizes(r, ""));
  return CheckTuneNumbers(r);
}

absl::Status CheckExportRequestLimits(const v1::ExportRequest& r) {
  RETURN_IF_ERROR(CheckModelRequest(r.model()));
  RETURN_IF_ERROR(CheckFieldSizes(r, ""));
  RETURN_IF_ERROR(CheckLimit(Limit::kWorldSize, r.world_size()));
  RETURN_IF_ERROR(CheckLimit(Limit::kWorldSize, r.devices_per_node(), "devices_per_node"));
  RETURN_IF_ERROR(CheckLimit(Limit::kSeqLen, r.seq_len()));
  return CheckLimit(Limit::kGlobalBatchSize, r.global_batch_size());
}

absl::Status CheckQueryRequestLimits(const v1::QueryStrategiesRequest& r) {
  RETURN_IF_ERROR(CheckModelRequest(r.model()));
  RETURN_IF_ERROR(CheckLimit(Limit::kDeviceTypeBytes, static_cast<double>(r.device_type().size()),
                             "device_type"));
  RETURN_IF_ERROR(CheckFieldSizes(r, ""));
  RETURN_IF_ERROR(CheckLimit(Limit::kWorldSize, r.world_size()));
  RETURN_IF_ERROR(CheckLimit(Limit::kSeqLen, r.seq_len()));
  return CheckLimit(Limit::kGlobalBatchSize, r.global_batch_size());
}

absl::Status CheckEstimateRequestLimits(const v1::EstimateRequest& r) {
  RETURN_IF_ERROR(CheckModelRequest(r.model()));
  RETURN_IF_ERROR(
      CheckJsonText(r.device_catalog_json(), Limit::kModelConfigBytes, "device_catalog_json"));
  RETURN_IF_ERROR(CheckFieldSizes(r, ""));
  RETURN_IF_ERROR(CheckLimit(Limit::kWorldSize, r.world_size()));
  RETURN_IF_ERROR(CheckLimit(Limit::kWorldSize, r.devices_per_node(), "devices_per_node"));
  RETURN_IF_ERROR(CheckLimit(Limit::kSeqLen, r.seq_len()));
  RETURN_IF_ERROR(CheckLimit(Limit::kGlobalBatchSize, r.global_batch_size()));
  for (int i = 0; i < r.world_sizes_size(); ++i) {
    RETURN_IF_ERROR(
        CheckLimit(Limit::kWorldSize, r.world_sizes(i), absl::StrCat("world_sizes[", i, "]")));
  }
  RETURN_IF_ERROR(CheckLimit(Limit::kEstimateClusters, double(std::max(1, r.world_sizes_size())) *
                                                           double(std::max(1, r.devices_size()))));
  return CheckLimit(Limit::kListEntries, r.top(), "top");
}

absl::Status CheckModelLimits(const ModelSpec& model) {
  const bool gpt2 = model.family == "gpt2";
  for (const ModelDimension& d : kModelDimensions) {
    const RequestLimit& row = LimitRow(d.limit);
    const std::string field = gpt2 && d.gpt2_key != nullptr
                                  ? absl::StrCat("model_config.", d.gpt2_key)
                              : d.key != nullptr ? absl::StrCat("model_config.", d.key)
                                                 : row.field;
    RETURN_IF_ERROR(CheckLimit(d.limit, model.*d.member, field));
  }
  return absl::OkStatus();
}

absl::Status CheckRegisterRequestLimits(const v1::RegisterRequest& r) {
  RETURN_IF_ERROR(
      CheckLimit(Limit::kWorkerIdBytes, static_cast<double>(r.worker_id().size()), "worker_id"));
  RETURN_IF_ERROR(CheckLimit(Limit::kIdentityKeyBytes, static_cast<double>(r.identity_key().size()),
                             "identity_key"));
  RETURN_IF_ERROR(
      CheckLimit(Limit::kAddressBytes, static_cast<double>(r.address().size()), "address"));
  RETURN_IF_ERROR(CheckLimit(Limit::kDevices, r.devices_size()));
  for (int i = 0; i < r.devices_size(); ++i) RETURN_IF_ERROR(CheckDevice(r.devices(i), i));
  RETURN_IF_ERROR(
      CheckLimit(Limit::kRendezvousPort, r.rendezvous_port_min(), "rendezvous_port_min"));
  RETURN_IF_ERROR(
      CheckLimit(Limit::kRendezvousPort, r.rendezvous_port_max(), "rendezvous_port_max"));
  RETURN_IF_ERROR(CheckLimit(Limit::kHostCores, r.host_cpu_cores()));
  RETURN_IF_ERROR(CheckLimit(Limit::kHostMemoryBytes, static_cast<double>(r.host_memory_bytes())));
  RETURN_IF_ERROR(CheckLimit(Limit::kLaunchers, r.launchers_size()));
  for (int i = 0; i < r.launchers_size(); ++i) RETURN_IF_ERROR(CheckLauncher(r.launchers(i), i));
  return CheckAllPrintable(r, "");
}

}  // namespace autoaccel
