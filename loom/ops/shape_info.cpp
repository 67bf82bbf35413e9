#include "loom/ops/shape_info.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/utils.h"
#include "loom/primitives/shape_info.h"
#include "loom/transforms/shapeless.h"

namespace loom {

array number_of_elements(const array& a, const std::vector<int>& axes, bool inverted, Dtype dtype,
                         StreamOrDevice s) {
  std::vector<int> ax;
  for (int axis : axes) {
    int v = axis < 0 ? axis + a.ndim() : axis;
    if (v < 0 || v >= a.ndim()) {
      std::ostringstream msg;
      msg << "[number_of_elements] axis " << axis << " is out of bounds for array with " << a.ndim()
          << " dimensions.";
      throw std::out_of_range(msg.str());
    }
    ax.push_back(v);
  }
  std::sort(ax.begin(), ax.end());
  auto p = std::make_shared<NumberOfElements>(to_stream(s), ax, inverted, dtype);
  if (!transforms::in_shapeless_trace()) return array(p->count(a.shape()), dtype);
  return array(Shape{}, dtype, p, {a});
}

} // namespace loom
