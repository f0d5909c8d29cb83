// Training: the batched forward and backward passes (core/model/backward.h),
// AdamW (optimizer.h), the IDX data sets (core/io/dataset.h) and evaluation.
#pragma once
#include "core/io/dataset.h"
#include "core/model/backward.h"
#include "core/train/evaluate.h"
#include "core/train/optimizer.h"
