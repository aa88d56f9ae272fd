"""The CUDA runtime through ctypes: what the GPU kit needs to drive a generated
launcher without PyTorch or the switchyard package (device buffers, streams, events,
graph capture, graph nodes). Every call is checked; a failure raises
CudaError naming the call and the error string.
"""
import ctypes
import os


class CudaError(RuntimeError):
    pass


CAPTURE_MODE_THREAD_LOCAL = 1
GRAPH_NODE_TYPE_KERNEL = 0


def cuda_home():
    return os.environ.get("CUDA_HOME") or "/usr/local/cuda"


def cudart_path():
    """The toolkit's cudart (the one the launchers link)."""
    for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
        path = os.path.join(cuda_home(), sub, "libcudart.so")
        if os.path.exists(path):
            return path
    raise CudaError(f"no libcudart.so under {cuda_home()} (set CUDA_HOME)")


class Cudart:
    def __init__(self):
        self.rt = ctypes.CDLL(cudart_path(), mode=ctypes.RTLD_GLOBAL)
        self.rt.cudaGetErrorString.restype = ctypes.c_char_p

    def check(self, status, what):
        if status != 0:
            raise CudaError(f"{what}: {self.rt.cudaGetErrorString(status).decode()} "
                            f"(cudaError {status})")

    def device_count(self):
        n = ctypes.c_int(0)
        status = self.rt.cudaGetDeviceCount(ctypes.byref(n))
        return n.value if status == 0 else 0

    def driver_version(self):
        v = ctypes.c_int(0)
        self.rt.cudaDriverGetVersion(ctypes.byref(v))
        return v.value

    def runtime_version(self):
        v = ctypes.c_int(0)
        self.rt.cudaRuntimeGetVersion(ctypes.byref(v))
        return v.value

    # memory
    def malloc(self, nbytes):
        ptr = ctypes.c_void_p()
        self.check(self.rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(max(int(nbytes), 1))),
                   f"cudaMalloc({nbytes})")
        return ptr

    def free(self, ptr):
        self.rt.cudaFree(ptr)

    def to_device(self, array):
        ptr = self.malloc(array.nbytes)
        self.check(self.rt.cudaMemcpy(ptr, array.ctypes.data_as(ctypes.c_void_p),
                                      ctypes.c_size_t(array.nbytes), 1), "cudaMemcpy H2D")
        return ptr

    def upload(self, ptr, array):
        self.check(self.rt.cudaMemcpy(ptr, array.ctypes.data_as(ctypes.c_void_p),
                                      ctypes.c_size_t(array.nbytes), 1), "cudaMemcpy H2D")

    def to_host(self, ptr, array):
        self.check(self.rt.cudaMemcpy(array.ctypes.data_as(ctypes.c_void_p), ptr,
                                      ctypes.c_size_t(array.nbytes), 2), "cudaMemcpy D2H")
        return array

    def fill(self, ptr, byte, nbytes):
        self.check(self.rt.cudaMemset(ptr, ctypes.c_int(byte), ctypes.c_size_t(nbytes)),
                   "cudaMemset")

    def synchronize(self):
        self.check(self.rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")

    # streams and events
    def stream(self):
        s = ctypes.c_void_p()
        self.check(self.rt.cudaStreamCreate(ctypes.byref(s)), "cudaStreamCreate")
        return s

    def stream_sync(self, stream):
        self.check(self.rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize")

    def event(self):
        e = ctypes.c_void_p()
        self.check(self.rt.cudaEventCreate(ctypes.byref(e)), "cudaEventCreate")
        return e

    def record(self, event, stream):
        self.check(self.rt.cudaEventRecord(event, stream), "cudaEventRecord")

    def elapsed_ms(self, start, stop):
        self.check(self.rt.cudaEventSynchronize(stop), "cudaEventSynchronize")
        ms = ctypes.c_float()
        self.check(self.rt.cudaEventElapsedTime(ctypes.byref(ms), start, stop),
                   "cudaEventElapsedTime")
        return ms.value

    # graphs
    def capture(self, stream, launch):
        """The graph of what `launch()` enqueues on `stream` (a capture, nothing runs)."""
        self.check(self.rt.cudaStreamBeginCapture(stream, CAPTURE_MODE_THREAD_LOCAL),
                   "cudaStreamBeginCapture")
        try:
            launch()
        finally:
            graph = ctypes.c_void_p()
            status = self.rt.cudaStreamEndCapture(stream, ctypes.byref(graph))
        self.check(status, "cudaStreamEndCapture")
        return graph

    def graph_nodes(self, graph):
        count = ctypes.c_size_t(0)
        self.check(self.rt.cudaGraphGetNodes(graph, None, ctypes.byref(count)),
                   "cudaGraphGetNodes")
        nodes = (ctypes.c_void_p * max(count.value, 1))()
        self.check(self.rt.cudaGraphGetNodes(graph, nodes, ctypes.byref(count)),
                   "cudaGraphGetNodes")
        return list(nodes)[:count.value]

    def kernel_nodes(self, graph):
        kernels = []
        for node in self.graph_nodes(graph):
            kind = ctypes.c_int(-1)
            self.check(self.rt.cudaGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(kind)),
                       "cudaGraphNodeGetType")
            if kind.value == GRAPH_NODE_TYPE_KERNEL:
                kernels.append(ctypes.c_void_p(node))
        return kernels

    def instantiate(self, graph):
        exe = ctypes.c_void_p()
        self.check(self.rt.cudaGraphInstantiate(ctypes.byref(exe), graph,
                                                ctypes.c_ulonglong(0)), "cudaGraphInstantiate")
        return exe

    def graph_launch(self, exe, stream):
        self.check(self.rt.cudaGraphLaunch(exe, stream), "cudaGraphLaunch")

    def destroy_graph(self, graph, exe=None):
        if exe is not None:
            self.rt.cudaGraphExecDestroy(exe)
        self.rt.cudaGraphDestroy(graph)

