class _Flags:
    def __init__(self, **kw):
        for k, v in kw.items():
            object.__setattr__(self, k, v)


class _CudaFlags(_Flags):
    pass


class _MatmulFlags(_Flags):
    pass


class _CudnnFlags(_Flags):
    pass


cuda = _CudaFlags(matmul=_MatmulFlags(allow_tf32=False))
cudnn = _CudnnFlags(benchmark=False, allow_tf32=True)
