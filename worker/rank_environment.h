// Which of the worker's environment variables a trial rank inherits. A rank
// runs code the worker did not write (a user's TorchScript, a launcher's
// script): it gets what training needs — paths, locale, the settings of
// CUDA, NCCL, gloo, PyTorch, the math libraries and the Hugging Face cache —
// and never the worker's credentials (a token in AUTOACCEL_TOKEN, a cloud
// key). The operator replaces the list with --rank-env (repeatable: NAME,
// or PREFIX* for every name that starts so). Whatever the list, a name
// holding TOKEN, SECRET, PASSWORD, CREDENTIAL or KEY is never passed on
// unless the operator names it exactly. Variables the worker sets for the
// rank itself (RANK, MASTER_ADDR, AUTOACCEL_*, ...) are not filtered.
//
// Immutable after construction; any thread.
#ifndef AUTOACCEL_WORKER_RANK_ENVIRONMENT_H_
#define AUTOACCEL_WORKER_RANK_ENVIRONMENT_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace autoaccel {

// The list ranks inherit when the operator gives none.
inline constexpr const char* kDefaultRankEnvironment[] = {"PATH",
                                                          "LANG",
                                                          "LANGUAGE",
                                                          "LC_*",
                                                          "TZ",
                                                          "TERM",
                                                          "USER",
                                                          "LOGNAME",
                                                          "LD_LIBRARY_PATH",
                                                          "PYTHONPATH",
                                                          "PYTHONHASHSEED",
                                                          "VIRTUAL_ENV",
                                                          "CONDA_PREFIX",
                                                          "CUDA_*",
                                                          "NVIDIA_*",
                                                          "NCCL_*",
                                                          "GLOO_*",
                                                          "TORCH_*",
                                                          "PYTORCH_*",
                                                          "OMP_*",
                                                          "MKL_*",
                                                          "KMP_*",
                                                          "OPENBLAS_*",
                                                          "HF_*",
                                                          "TRANSFORMERS_*",
                                                          "TOKENIZERS_PARALLELISM",
                                                          "XLA_*",
                                                          "TRITON_*"};

class RankEnvAllowlist {
 public:
  // kDefaultRankEnvironment.
  RankEnvAllowlist();
  // `patterns`: names, or prefixes ending in '*'; empty: the default.
  explicit RankEnvAllowlist(std::vector<std::string> patterns);

  // Whether a rank inherits the worker's variable `name`.
  bool Allows(absl::string_view name) const;
  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  std::vector<std::string> patterns_;
};

}  // namespace autoaccel

#endif  // AUTOACCEL_WORKER_RANK_ENVIRONMENT_H_
