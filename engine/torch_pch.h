// The LibTorch headers most engine translation units include, precompiled once
// (engine/CMakeLists.txt: target_precompile_headers) and reused by every target
// that compiles against LibTorch: parsing them is most of each unit's compile
// time. Every unit still includes what it uses; this file only makes it faster.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/autograd.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/types.h>
