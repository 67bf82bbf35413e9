// Everything a C++ user needs: include "loom/ops.h".
#pragma once

#include "loom/allocator/memory.h"
#include "loom/array.h"
#include "loom/device.h"
#include "loom/dtype.h"
#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/indexing.h" // array indexing, sorting and scans
#include "loom/ops/scan.h"
#include "loom/ops/sort.h"
#include "loom/ops/conv.h"
#include "loom/ops/linalg.h"
#include "loom/ops/random.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"
#include "loom/ops/utils.h"
#include "loom/scheduler/scheduler.h"
#include "loom/stream.h"
#include "loom/transforms/transforms.h"
