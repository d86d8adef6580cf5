import time


class _BaseDataLoaderIter:
    def __init__(self, loader):
        self.loader = loader
        self.i = 0

    def __next__(self):
        if self.i >= len(self.loader.dataset):
            raise StopIteration
        self.i += 1
        # Preparing a batch takes 12 ms of one worker: more workers have it ready sooner.
        time.sleep(0.012 / (1 + self.loader.num_workers))
        return self.loader.dataset[self.i - 1]


class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False):
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.persistent_workers = persistent_workers
        self.prefetch_factor = prefetch_factor

    def __iter__(self):
        return _BaseDataLoaderIter(self)
