// The built-in device catalog's text: search/device_catalog.json, which CMake
// copies into a generated device_catalog_data.cc (search/CMakeLists.txt) so
// the binary needs no data file. Read it through DeviceCatalog::BuiltIn().
#ifndef AUTOACCEL_SEARCH_DEVICE_CATALOG_DATA_H_
#define AUTOACCEL_SEARCH_DEVICE_CATALOG_DATA_H_

namespace autoaccel {

extern const char kBuiltInDeviceCatalogJson[];

}  // namespace autoaccel

#endif  // AUTOACCEL_SEARCH_DEVICE_CATALOG_DATA_H_
