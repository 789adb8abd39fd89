// libpaddle_like_runtime.so holds the runtime's static libraries whole (see CMakeLists.txt);
// a shared library needs at least one source of its own, and this is it.
namespace paddle_like {
int runtime_anchor() { return 0; }
}  // namespace paddle_like
