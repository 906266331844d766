/* The hsaKmt calls ROCr 5.2.3 does not import, from a C client written against Debian's
 * hsakmt.h (libhsakmt-dev 5.2.3): the ones that work on this device (ResetEvent,
 * QueryEventState, RegisterMemory(ToNodes), UnmapGraphicHandle, ProcessVMRead/Write) and the
 * exact status of each one it refuses as libhsakmt 5.2.3 does on a driver or host without the
 * feature (the old debugger, the ROCm debugger's version, PMC traces without IOMMU PMU
 * slots, SPM, MapGraphicHandle, GetQueueInfo without a context save area).
 * Run with CUSE_KFD_EMBEDDED=1 and LD_LIBRARY_PATH at the directory of cuse-kfd's library.
 * Prints "rest_of_api: ok" and exits 0 when every check holds. */
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <hsakmt.h>
#include <hsa/hsa.h>
#include <hsa/amd_hsa_queue.h>
#include <hsa/amd_hsa_signal.h>

#include "check.h"
#define IS(call, status) CHECK((call) == (status))

/* libhsakmt 5.2.3's SPM calls return the ioctl's -1 as their status. */
#define SPM_FAILED ((HSAKMT_STATUS)-1)

static void *pages(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	return p;
}

int main(void)
{
	HSAuint32 gpu = 1, bad_node = 7, major = 5, minor = 5;
	HsaCounterProperties *props = NULL;

	/* Before the KFD is open, as libhsakmt answers each one then. */
	IS(hsaKmtResetEvent(NULL), HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED);
	IS(hsaKmtQueryEventState(NULL), HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED);
	IS(hsaKmtMapGraphicHandle(gpu, 0, 0, 0, 4096, NULL), HSAKMT_STATUS_NOT_IMPLEMENTED);
	IS(hsaKmtGetKernelDebugTrapVersionInfo(&major, &minor), HSAKMT_STATUS_ERROR);
	IS(hsaKmtPmcGetCounterProperties(gpu, &props), HSAKMT_STATUS_NO_MEMORY);
	IS(hsaKmtSPMAcquire(gpu), HSAKMT_STATUS_INVALID_NODE_UNIT);
	IS(hsaKmtDbgRegister(gpu), HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED);

	OK(hsaKmtOpenKFD());
	HsaSystemProperties sys;
	OK(hsaKmtAcquireSystemProperties(&sys));
	HsaNodeProperties np;
	OK(hsaKmtGetNodeProperties(gpu, &np));
	CHECK(np.NumFComputeCores > 0);

	/* ResetEvent: a manual-reset event stays signaled through waits until reset. */
	HsaEventDescriptor edesc = {0};
	edesc.EventType = HSA_EVENTTYPE_SIGNAL;
	edesc.NodeId = gpu;
	HsaEvent *event = NULL;
	OK(hsaKmtCreateEvent(&edesc, true, false, &event));
	IS(hsaKmtWaitOnEvent(event, 0), HSAKMT_STATUS_WAIT_TIMEOUT);
	OK(hsaKmtSetEvent(event));
	OK(hsaKmtWaitOnEvent(event, 0));
	OK(hsaKmtWaitOnEvent(event, 0));
	OK(hsaKmtQueryEventState(event));
	OK(hsaKmtResetEvent(event));
	IS(hsaKmtWaitOnEvent(event, 0), HSAKMT_STATUS_WAIT_TIMEOUT);
	OK(hsaKmtQueryEventState(event));
	IS(hsaKmtResetEvent(NULL), HSAKMT_STATUS_INVALID_HANDLE);
	IS(hsaKmtQueryEventState(NULL), HSAKMT_STATUS_INVALID_HANDLE);
	/* System events cannot be reset, as they cannot be set. */
	HsaEventDescriptor fdesc = {0};
	fdesc.EventType = HSA_EVENTTYPE_MEMORY;
	fdesc.NodeId = gpu;
	HsaEvent *fault = NULL;
	OK(hsaKmtCreateEvent(&fdesc, true, false, &fault));
	IS(hsaKmtResetEvent(fault), HSAKMT_STATUS_ERROR);
	OK(hsaKmtDestroyEvent(fault));
	printf("rest_of_api: ResetEvent unsignals a set event\n");

	/* RegisterMemory: plain anonymous pages, then mapped for the GPU, which writes them: an AQL
	 * barrier packet's completion signal lives in the registered pages. */
	HSAuint64 alt = 0;
	HsaMemMapFlags mflags = {0};
	HsaMemFlags hflags = {0};
	hflags.ui32.HostAccess = 1;
	hflags.ui32.ExecuteAccess = 1;
	void *user = pages(2 * 4096);
	OK(hsaKmtRegisterMemory(user, 2 * 4096));
	OK(hsaKmtMapMemoryToGPU(user, 2 * 4096, &alt));
	CHECK(alt != 0);
	HsaPointerInfo info;
	OK(hsaKmtQueryPointerInfo(user, &info));
	CHECK(info.Type == HSA_POINTER_REGISTERED_USER && info.CPUAddress == user && info.GPUAddress == alt);
	CHECK(info.NMappedNodes == 1 && info.MappedNodes[0] == gpu);

	void *ring = NULL, *desc = NULL;
	OK(hsaKmtAllocMemory(0, 4096, hflags, &ring));
	OK(hsaKmtAllocMemory(0, 4096, hflags, &desc));
	OK(hsaKmtMapMemoryToGPUNodes(ring, 4096, NULL, mflags, 1, &gpu));
	OK(hsaKmtMapMemoryToGPUNodes(desc, 4096, NULL, mflags, 1, &gpu));
	amd_queue_t *q = desc;
	memset(q, 0, sizeof(*q));
	for (int i = 0; i < 4096 / 64; i++)
		((hsa_barrier_and_packet_t *)ring)[i].header = HSA_PACKET_TYPE_INVALID;
	HsaQueueResource res = {0};
	res.Queue_read_ptr_aql = (HSAuint64 *)&q->read_dispatch_id;
	res.Queue_write_ptr_aql = (HSAuint64 *)&q->write_dispatch_id;
	OK(hsaKmtCreateQueue(gpu, HSA_QUEUE_COMPUTE_AQL, 100, HSA_QUEUE_PRIORITY_NORMAL, ring, 4096, NULL, &res));

	amd_signal_t *sig = (amd_signal_t *)((char *)user + 4096);
	memset(sig, 0, sizeof(*sig));
	sig->kind = AMD_SIGNAL_KIND_USER;
	sig->value = 1;
	hsa_barrier_and_packet_t *pkt = ring;
	memset((char *)pkt + 4, 0, 60);
	pkt->completion_signal.handle = alt + 4096;
	uint16_t header = HSA_PACKET_TYPE_BARRIER_AND << HSA_PACKET_HEADER_TYPE |
			  HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE;
	__atomic_store_n(&pkt->header, header, __ATOMIC_RELEASE);
	__atomic_store_n(&q->write_dispatch_id, 1, __ATOMIC_RELEASE);
	__atomic_store_n(res.Queue_DoorBell_aql, 0, __ATOMIC_RELEASE);
	for (int i = 0; i < 5000 && __atomic_load_n(&sig->value, __ATOMIC_ACQUIRE) != 0; i++)
		usleep(1000);
	CHECK(__atomic_load_n(&sig->value, __ATOMIC_ACQUIRE) == 0);
	printf("rest_of_api: the GPU completed a signal in RegisterMemory'd pages\n");

	/* GetQueueInfo: no context save area on this device, libhsakmt's ERROR for that. */
	HsaQueueInfo qinfo;
	memset(&qinfo, 0x5a, sizeof(qinfo));
	IS(hsaKmtGetQueueInfo(res.QueueId, &qinfo), HSAKMT_STATUS_ERROR);
	CHECK(qinfo.NumCUAssigned == 0x5a5a5a5a);
	IS(hsaKmtGetQueueInfo(res.QueueId, NULL), HSAKMT_STATUS_INVALID_PARAMETER);
	IS(hsaKmtGetQueueInfo(0, &qinfo), HSAKMT_STATUS_INVALID_PARAMETER);
	OK(hsaKmtDestroyQueue(res.QueueId));

	/* UnmapGraphicHandle is UnmapMemoryToGPU. */
	OK(hsaKmtUnmapGraphicHandle(gpu, (HSAuint64)user, 2 * 4096));
	OK(hsaKmtQueryPointerInfo(user, &info));
	CHECK(info.NMappedNodes == 0);
	OK(hsaKmtDeregisterMemory(user));
	IS(hsaKmtQueryPointerInfo(user, &info), HSAKMT_STATUS_ERROR);

	/* RegisterMemoryToNodes: registered for the GPU node only. */
	void *user2 = pages(4096);
	IS(hsaKmtRegisterMemoryToNodes(user2, 4096, 1, &bad_node), HSAKMT_STATUS_INVALID_NODE_UNIT);
	IS(hsaKmtRegisterMemoryToNodes(user2, 4096, 0, &gpu), HSAKMT_STATUS_INVALID_PARAMETER);
	OK(hsaKmtRegisterMemoryToNodes(user2, 4096, 1, &gpu));
	OK(hsaKmtQueryPointerInfo(user2, &info));
	CHECK(info.Type == HSA_POINTER_REGISTERED_USER && info.NRegisteredNodes == 1 && info.RegisteredNodes[0] == gpu);
	OK(hsaKmtMapMemoryToGPU(user2, 4096, &alt));
	OK(hsaKmtUnmapMemoryToGPU(user2));
	OK(hsaKmtDeregisterMemory(user2));
	printf("rest_of_api: RegisterMemoryToNodes registers for the nodes given\n");

	/* The pre-ROCm-5 debugger, which amdkfd and this device refuse (EPERM): ERROR. */
	IS(hsaKmtDbgRegister(gpu), HSAKMT_STATUS_ERROR);
	IS(hsaKmtDbgRegister(bad_node), HSAKMT_STATUS_INVALID_NODE_UNIT);
	IS(hsaKmtDbgUnregister(gpu), HSAKMT_STATUS_ERROR);
	HsaDbgWaveMessage msg = {0};
	IS(hsaKmtDbgWavefrontControl(gpu, HSA_DBG_WAVEOP_HALT, HSA_DBG_WAVEMODE_SINGLE, 0, &msg), HSAKMT_STATUS_ERROR);
	HSA_DBG_WATCH_MODE modes[101] = {HSA_DBG_WATCH_ALL};
	void *addrs[101] = {ring};
	HSAuint64 masks[101] = {0};
	IS(hsaKmtDbgAddressWatch(gpu, 1, modes, addrs, masks, NULL), HSAKMT_STATUS_ERROR);
	IS(hsaKmtDbgAddressWatch(gpu, 101, modes, addrs, masks, NULL), HSAKMT_STATUS_INVALID_PARAMETER);
	IS(hsaKmtDbgAddressWatch(bad_node, 1, modes, addrs, masks, NULL), HSAKMT_STATUS_INVALID_NODE_UNIT);
	/* The ROCm 5.2 debugger is absent too. */
	IS(hsaKmtGetKernelDebugTrapVersionInfo(&major, &minor), HSAKMT_STATUS_ERROR);
	CHECK(major == 5 && minor == 5);

	/* Performance counters: libhsakmt 5.2.3 lists its gfx9 table (src/pmc_table.c,
	 * vega_blocks): 20 non-privileged blocks, 158 slots in all; no IOMMU block on this
	 * topology. Blocks are laid out one after the other, each followed by its counters. */
	OK(hsaKmtPmcGetCounterProperties(gpu, &props));
	CHECK(props != NULL && props->NumBlocks == 20 && props->NumConcurrent == 158);
	HsaCounterBlockProperties *blk = &props->Blocks[0];
	HSAuint32 total = 0, slots = 0;
	for (HSAuint32 i = 0; i < props->NumBlocks; i++) {
		for (HSAuint32 j = 0; j < blk->NumCounters; j++) {
			HsaCounter *c = &blk->Counters[j];
			CHECK(c->Type == HSA_PROFILE_TYPE_NONPRIV_IMMEDIATE && c->CounterSizeInBits == 64);
			CHECK(c->CounterMask == ~0ull && c->Flags.ui32.Global && c->BlockIndex == blk->Counters[0].BlockIndex);
		}
		total += blk->NumCounters;
		slots += blk->NumConcurrent;
		blk = (HsaCounterBlockProperties *)&blk->Counters[blk->NumCounters];
	}
	CHECK(total == 3289 && slots == 158);
	/* SQ, the 12th block: {b5c396b6-d310-47e4-86fc-5cc3043af508}, 16 slots, ids 1..183 and
	 * 255..372. */
	blk = &props->Blocks[0];
	for (int i = 0; i < 11; i++)
		blk = (HsaCounterBlockProperties *)&blk->Counters[blk->NumCounters];
	CHECK(blk->BlockId.Data1 == 0xb5c396b6 && blk->BlockId.Data2 == 0xd310 && blk->BlockId.Data3 == 0x47e4);
	CHECK(blk->BlockId.Data4[0] == 0x86 && blk->BlockId.Data4[7] == 0x08);
	CHECK(blk->NumConcurrent == 16 && blk->NumCounters == 301 && blk->Counters[0].BlockIndex == 14);
	CHECK(blk->Counters[0].CounterId == 1 && blk->Counters[182].CounterId == 183 && blk->Counters[183].CounterId == 255);
	HsaCounterProperties *again = NULL;
	OK(hsaKmtPmcGetCounterProperties(gpu, &again));
	CHECK(again == props);
	IS(hsaKmtPmcGetCounterProperties(0, &again), HSAKMT_STATUS_INVALID_PARAMETER); /* the CPU */
	IS(hsaKmtPmcGetCounterProperties(bad_node, &props), HSAKMT_STATUS_INVALID_NODE_UNIT);
	IS(hsaKmtPmcGetCounterProperties(gpu, NULL), HSAKMT_STATUS_INVALID_PARAMETER);
	/* Only privileged counters register, on a listed block, at most its slots. */
	HsaCounter counter = props->Blocks[0].Counters[0]; /* CB's first, non-privileged */
	HsaPmcTraceRoot root;
	IS(hsaKmtPmcRegisterTrace(gpu, 1, &counter, &root), HSAKMT_STATUS_INVALID_PARAMETER);
	counter.Type = HSA_PROFILE_TYPE_PRIVILEGED_IMMEDIATE;
	HsaCounter eight[8];
	for (int i = 0; i < 8; i++)
		eight[i] = counter;
	IS(hsaKmtPmcRegisterTrace(gpu, 8, eight, &root), HSAKMT_STATUS_INVALID_PARAMETER); /* 7 slots */
	eight[0].BlockIndex = 24; /* libhsakmt's IOMMU block */
	IS(hsaKmtPmcRegisterTrace(gpu, 1, eight, &root), HSAKMT_STATUS_INVALID_PARAMETER);
	IS(hsaKmtPmcRegisterTrace(gpu, 0, &counter, &root), HSAKMT_STATUS_INVALID_PARAMETER);
	IS(hsaKmtPmcRegisterTrace(bad_node, 1, &counter, &root), HSAKMT_STATUS_INVALID_NODE_UNIT);
	IS(hsaKmtPmcRegisterTrace(gpu, 1, &counter, NULL), HSAKMT_STATUS_INVALID_PARAMETER);
	OK(hsaKmtPmcRegisterTrace(gpu, 7, eight + 1, &root));
	CHECK(root.NumberOfPasses == 1 && root.TraceBufferMinSizeBytes == 4096 && root.TraceId != 0);
	char trace_buf[64];
	/* No slots to acquire (only the IOMMU block has them), so it never starts. */
	IS(hsaKmtPmcAcquireTraceAccess(gpu, root.TraceId), HSAKMT_STATUS_UNAVAILABLE);
	OK(hsaKmtPmcReleaseTraceAccess(gpu, root.TraceId));
	IS(hsaKmtPmcStartTrace(root.TraceId, trace_buf, sizeof(trace_buf)), HSAKMT_STATUS_ERROR);
	IS(hsaKmtPmcQueryTrace(root.TraceId), HSAKMT_STATUS_NO_MEMORY);
	IS(hsaKmtPmcStopTrace(root.TraceId), HSAKMT_STATUS_ERROR);
	IS(hsaKmtPmcUnregisterTrace(0, root.TraceId), HSAKMT_STATUS_INVALID_NODE_UNIT);
	OK(hsaKmtPmcUnregisterTrace(gpu, root.TraceId));
	HSATraceId unknown = 0x1000;
	IS(hsaKmtPmcAcquireTraceAccess(gpu, 0), HSAKMT_STATUS_INVALID_PARAMETER);
	IS(hsaKmtPmcAcquireTraceAccess(gpu, unknown), HSAKMT_STATUS_INVALID_HANDLE);
	IS(hsaKmtPmcStartTrace(unknown, trace_buf, sizeof(trace_buf)), HSAKMT_STATUS_INVALID_HANDLE);
	IS(hsaKmtPmcStartTrace(unknown, NULL, sizeof(trace_buf)), HSAKMT_STATUS_INVALID_PARAMETER);
	IS(hsaKmtPmcQueryTrace(unknown), HSAKMT_STATUS_INVALID_HANDLE);
	IS(hsaKmtPmcStopTrace(unknown), HSAKMT_STATUS_INVALID_HANDLE);
	IS(hsaKmtPmcStopTrace(0), HSAKMT_STATUS_INVALID_PARAMETER);
	IS(hsaKmtPmcReleaseTraceAccess(gpu, unknown), HSAKMT_STATUS_INVALID_HANDLE);
	IS(hsaKmtPmcUnregisterTrace(gpu, unknown), HSAKMT_STATUS_INVALID_HANDLE);
	IS(hsaKmtPmcUnregisterTrace(bad_node, unknown), HSAKMT_STATUS_INVALID_NODE_UNIT);

	/* SPM: the driver has no RLC_SPM request; libhsakmt returns the ioctl's -1. */
	IS(hsaKmtSPMAcquire(gpu), SPM_FAILED);
	IS(hsaKmtSPMAcquire(bad_node), HSAKMT_STATUS_INVALID_NODE_UNIT);
	HSAuint32 timeout = 10, copied = 77;
	bool loss = true;
	IS(hsaKmtSPMSetDestBuffer(gpu, 4096, &timeout, &copied, ring, &loss), SPM_FAILED);
	CHECK(timeout == 10 && copied == 0 && !loss);
	IS(hsaKmtSPMRelease(gpu), SPM_FAILED);
	IS(hsaKmtSPMRelease(bad_node), HSAKMT_STATUS_INVALID_NODE_UNIT);

	/* Cross-memory copies (AMD's out-of-tree CROSS_MEMORY_COPY), here within this process. */
	unsigned char *a = NULL, *b = NULL;
	OK(hsaKmtAllocMemory(0, 4096, hflags, (void **)&a));
	OK(hsaKmtAllocMemory(0, 4096, hflags, (void **)&b));
	OK(hsaKmtMapMemoryToGPUNodes(a, 4096, NULL, mflags, 1, &gpu));
	OK(hsaKmtMapMemoryToGPUNodes(b, 4096, NULL, mflags, 1, &gpu));
	memset(a, 0, 4096);
	memset(b, 0xa5, 4096);
	HsaMemoryRange local = {a, 4096}, remote = {b, 4096};
	HSAuint64 done = 99;
	OK(hsaKmtProcessVMRead(getpid(), &local, 1, &remote, 1, &done));
	CHECK(done == 4096 && a[0] == 0xa5 && a[4095] == 0xa5);
	memset(a, 0x5a, 2048);
	HsaMemoryRange half = {a, 2048};
	done = 99;
	OK(hsaKmtProcessVMWrite(getpid(), &half, 1, &remote, 1, &done));
	CHECK(done == 2048 && b[0] == 0x5a && b[2047] == 0x5a && b[2048] == 0xa5);
	/* A range past its buffer copies nothing and fails. */
	HsaMemoryRange past = {b + 2048, 4096};
	done = 99;
	IS(hsaKmtProcessVMRead(getpid(), &local, 1, &past, 1, &done), HSAKMT_STATUS_ERROR);
	CHECK(done == 0);
	IS(hsaKmtProcessVMRead(getpid(), NULL, 0, &remote, 1, &done), HSAKMT_STATUS_ERROR);
	OK(hsaKmtUnmapMemoryToGPU(a));
	OK(hsaKmtUnmapMemoryToGPU(b));
	OK(hsaKmtFreeMemory(a, 4096));
	OK(hsaKmtFreeMemory(b, 4096));

	/* A Kaveri-era call no upstream driver had. */
	HSAuint64 flat = 0;
	IS(hsaKmtMapGraphicHandle(gpu, 1, 2, 0, 4096, &flat), HSAKMT_STATUS_NOT_IMPLEMENTED);
	CHECK(flat == 0);

	OK(hsaKmtDestroyEvent(event));
	OK(hsaKmtUnmapMemoryToGPU(ring));
	OK(hsaKmtUnmapMemoryToGPU(desc));
	OK(hsaKmtFreeMemory(ring, 4096));
	OK(hsaKmtFreeMemory(desc, 4096));
	OK(hsaKmtCloseKFD());
	printf("rest_of_api: ok\n");
	return 0;
}
