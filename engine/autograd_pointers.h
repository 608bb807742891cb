// Pointers that a custom autograd Function carries to its backward pass.
// Functions take only tensors and plain values as arguments, and their
// saved data holds IValues, so a pointer (a process group, a shard, the
// object a node reports to) travels as an integer handle. The pointee must
// outlive the node's backward pass; nothing here owns it.
#ifndef AUTOACCEL_ENGINE_AUTOGRAD_POINTERS_H_
#define AUTOACCEL_ENGINE_AUTOGRAD_POINTERS_H_

#include <torch/autograd.h>

#include <cstdint>

namespace autoaccel {

// `p` as an integer, to pass to Function::apply or keep in saved data.
template <typename T>
int64_t PointerHandle(T* p) {
  return reinterpret_cast<int64_t>(p);
}

// The pointer of PointerHandle(p).
template <typename T>
T* FromPointerHandle(int64_t handle) {
  return reinterpret_cast<T*>(handle);
}

// Keeps `p` under `key` in the node's saved data; SavedPointer<T> returns it.
template <typename T>
void SavePointer(torch::autograd::AutogradContext* ctx, const char* key, T* p) {
  ctx->saved_data[key] = PointerHandle(p);
}
template <typename T>
T* SavedPointer(torch::autograd::AutogradContext* ctx, const char* key) {
  return FromPointerHandle<T>(ctx->saved_data[key].toInt());
}

}  // namespace autoaccel

#endif  // AUTOACCEL_ENGINE_AUTOGRAD_POINTERS_H_
