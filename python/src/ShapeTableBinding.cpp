//===- ShapeTableBinding.cpp - the shape parameter table, as compiled -----===//
//
// _switchyard.shape_parameters(): ShapeParameters.def as the C preprocessor reads it,
// for test/python/test_shape_table.py to check the Python package's reading of the
// same file (python/switchyard/_shapes.py) against.
//
//===----------------------------------------------------------------------===//
#include "Bindings.h"

#include <nanobind/stl/string.h>

namespace switchyard::python {

void bindShapeTable(nb::module_ &m) {
  m.def(
      "shape_parameters",
      [] {
        nb::list rows;
#define SHAPE_PARAMETER(FIELD, KIND, NAME, FLAG, VALUE_DESC, CONFIG_KEYS, PARAM, USES,     \
                        HELP)                                                              \
  {                                                                                        \
    nb::dict row;                                                                          \
    row["field"] = #FIELD;                                                                 \
    row["kind"] = #KIND;                                                                   \
    row["name"] = NAME;                                                                    \
    row["flag"] = FLAG;                                                                    \
    row["value_desc"] = VALUE_DESC;                                                        \
    row["config_keys"] = CONFIG_KEYS;                                                      \
    row["param"] = PARAM != 0;                                                             \
    row["uses"] = USES;                                                                    \
    row["help"] = HELP;                                                                    \
    rows.append(row);                                                                      \
  }
#include "switchyard/Dialect/Moe/ShapeParameters.def"
        return rows;
      },
      "The shape parameters (ShapeParameters.def) as the compiler has them: one dict "
      "per row; config_keys space-separated.");
}

} // namespace switchyard::python
