#include "server/python/py_cache.h"

#include <string>
#include <vector>

namespace rsslab {

void PyCache::Release(std::vector<PyObject*>* dropped) {
  for (PyObject* o : *dropped) Py_DECREF(o);
  dropped->clear();
}

bool PyCache::Put(absl::string_view key, PyObject* value, int64_t charge) {
  std::vector<PyObject*> dropped;
  Py_INCREF(value);
  bool kept = cache_.Put(key, value, charge, &dropped);
  Release(&dropped);
  return kept;
}

PyObject* PyCache::Get(absl::string_view key) {
  PyObject* out = nullptr;
  cache_.Get(key, [&](PyObject* const& v) {
    Py_INCREF(v);
    out = v;
  });
  return out;
}

bool PyCache::Delete(absl::string_view key) {
  std::vector<PyObject*> dropped;
  bool found = cache_.Erase(key, &dropped);
  Release(&dropped);
  return found;
}

void PyCache::Resize(int64_t limit_bytes) {
  std::vector<PyObject*> dropped;
  cache_.Resize(limit_bytes, &dropped);
  Release(&dropped);
}

void PyCache::Clear() {
  std::vector<PyObject*> dropped;
  cache_.Clear(&dropped);
  Release(&dropped);
}

namespace {

PyCache* g_cache = nullptr;

// Accepts str or bytes keys.
bool KeyOf(PyObject* obj, std::string* key) {
  if (PyUnicode_Check(obj)) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(obj, &n);
    if (s == nullptr) return false;
    key->assign(s, n);
    return true;
  }
  if (PyBytes_Check(obj)) {
    key->assign(PyBytes_AS_STRING(obj), PyBytes_GET_SIZE(obj));
    return true;
  }
  PyErr_SetString(PyExc_TypeError, "cache key must be str or bytes");
  return false;
}

// Bytes-like values are charged their length; anything else its
// __sizeof__(), which is what sys.getsizeof() reports without the gc header.
int64_t ChargeOf(PyObject* value) {
  if (PyBytes_Check(value)) return PyBytes_GET_SIZE(value);
  if (PyByteArray_Check(value)) return PyByteArray_GET_SIZE(value);
  if (PyUnicode_Check(value)) return PyUnicode_GET_LENGTH(value);
  PyObject* size = PyObject_CallMethod(value, "__sizeof__", nullptr);
  if (size == nullptr) return -1;
  int64_t n = PyLong_AsLongLong(size);
  Py_DECREF(size);
  return n;
}

PyObject* CachePut(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"key", "value", "size", nullptr};
  PyObject* key_obj = nullptr;
  PyObject* value = nullptr;
  PyObject* size_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O:put", const_cast<char**>(kwlist),
                                   &key_obj, &value, &size_obj)) {
    return nullptr;
  }
  std::string key;
  if (!KeyOf(key_obj, &key)) return nullptr;
  int64_t charge;
  if (size_obj == Py_None) {
    charge = ChargeOf(value);
    if (charge < 0) return nullptr;
  } else {
    charge = PyLong_AsLongLong(size_obj);
    if (charge == -1 && PyErr_Occurred()) return nullptr;
    if (charge < 0) {
      PyErr_SetString(PyExc_ValueError, "size must be >= 0");
      return nullptr;
    }
  }
  charge += static_cast<int64_t>(key.size());
  return PyBool_FromLong(g_cache->Put(key, value, charge));
}

PyObject* CacheGet(PyObject*, PyObject* arg) {
  std::string key;
  if (!KeyOf(arg, &key)) return nullptr;
  PyObject* v = g_cache->Get(key);
  if (v == nullptr) Py_RETURN_NONE;
  return v;
}

PyObject* CacheDelete(PyObject*, PyObject* arg) {
  std::string key;
  if (!KeyOf(arg, &key)) return nullptr;
  return PyBool_FromLong(g_cache->Delete(key));
}

PyObject* CacheResize(PyObject*, PyObject* arg) {
  long long limit = PyLong_AsLongLong(arg);
  if (limit == -1 && PyErr_Occurred()) return nullptr;
  if (limit < 0) {
    PyErr_SetString(PyExc_ValueError, "limit must be >= 0");
    return nullptr;
  }
  g_cache->Resize(limit);
  Py_RETURN_NONE;
}

PyObject* CacheStats(PyObject*, PyObject*) {
  CacheCounters c = g_cache->Counters();
  return Py_BuildValue("{s:L,s:L,s:L,s:K,s:K,s:K,s:K,s:L}", "entries",
                       static_cast<long long>(c.entries), "bytes",
                       static_cast<long long>(c.bytes), "limit_bytes",
                       static_cast<long long>(c.limit_bytes), "hits",
                       static_cast<unsigned long long>(c.hits), "misses",
                       static_cast<unsigned long long>(c.misses), "evictions",
                       static_cast<unsigned long long>(c.evictions), "puts",
                       static_cast<unsigned long long>(c.puts), "evicted_bytes",
                       static_cast<long long>(c.evicted_bytes));
}

PyMethodDef kCacheMethods[] = {
    {"put", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(CachePut)),
     METH_VARARGS | METH_KEYWORDS,
     "put(key, value, size=None) -> bool: store value, evicting LRU entries."},
    {"get", CacheGet, METH_O, "get(key) -> value or None."},
    {"delete", CacheDelete, METH_O, "delete(key) -> bool."},
    {"resize", CacheResize, METH_O, "resize(limit_bytes): evicts at once."},
    {"stats", CacheStats, METH_NOARGS, "stats() -> dict of counters."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kCacheModule = {PyModuleDef_HEAD_INIT, "rsslab.cache",
                            "The rsslab server's shared byte-bounded LRU cache.", -1,
                            kCacheMethods};

PyModuleDef kPackage = {PyModuleDef_HEAD_INIT, "rsslab", "rsslab server built-ins.", -1,
                        nullptr};

PyObject* InitRsslab() {
  PyObject* pkg = PyModule_Create(&kPackage);
  if (pkg == nullptr) return nullptr;
  PyObject* cache = PyModule_Create(&kCacheModule);
  if (cache == nullptr) {
    Py_DECREF(pkg);
    return nullptr;
  }
  // Make `import rsslab.cache` and `from rsslab import cache` both work.
  PyObject* modules = PyImport_GetModuleDict();
  if (PyDict_SetItemString(modules, "rsslab.cache", cache) < 0 ||
      PyModule_AddObject(pkg, "cache", cache) < 0) {
    Py_DECREF(cache);
    Py_DECREF(pkg);
    return nullptr;
  }
  // Mark as a package so the import system accepts the submodule.
  PyObject* path = PyList_New(0);
  PyModule_AddObject(pkg, "__path__", path);
  return pkg;
}

}  // namespace

void RegisterCacheModule(PyCache* cache) {
  g_cache = cache;
  PyImport_AppendInittab("rsslab", &InitRsslab);
}

PyObject* ImportCacheModule() { return PyImport_ImportModule("rsslab.cache"); }

}  // namespace rsslab
