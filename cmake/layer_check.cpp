// The translation unit of gpuutil_layer_check (CMakeLists.txt): a shared
// library made of every object of gpuutil_collectors, linked with the
// offline layer and without the runtime under -Wl,--no-undefined, so a
// collector that calls into the live session, the step path or the
// profiler fails to link. The library is never loaded; this file only
// gives the target a source of its own.
extern "C" int gpuutil_layer_check() { return 0; }
