/* A C client of libhsakmt.so.1 written against Debian's hsakmt.h (libhsakmt-dev 5.2.3), the
 * way ROCr drives it: open, topology, memory, an event, an AQL queue whose barrier packet raises
 * the event through its signal's mailbox, the calls the device answers "not supported", close.
 * Run with CUSE_KFD_EMBEDDED=1 and LD_LIBRARY_PATH at the directory of cuse-kfd's library.
 * Prints "client: ok" and exits 0 when every check holds. */
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <unistd.h>
#include <hsakmt.h>
#include <hsa/hsa.h>
#include <hsa/amd_hsa_queue.h>
#include <hsa/amd_hsa_signal.h>

#include "check.h"

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* ROCr's async-event thread: blocks until another thread sets the event. */
static void *waiter(void *arg)
{
	HsaEvent *list[1] = {arg};
	return (void *)(long)hsaKmtWaitOnMultipleEvents(list, 1, true, HSA_EVENTTIMEOUT_INFINITE);
}

static void ascii(char *out, const HSAuint16 *name)
{
	int i;
	for (i = 0; i < HSA_PUBLIC_NAME_SIZE - 1 && name[i]; i++)
		out[i] = (char)name[i];
	out[i] = 0;
}

int main(void)
{
	HsaVersionInfo version;
	HsaSystemProperties sys;
	HSAuint32 gpu = 0, n;

	CHECK(hsaKmtGetVersion(&version) == HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED);
	OK(hsaKmtOpenKFD());
	CHECK(hsaKmtOpenKFD() == HSAKMT_STATUS_KERNEL_ALREADY_OPENED);
	OK(hsaKmtCloseKFD());
	OK(hsaKmtGetVersion(&version));
	CHECK(version.KernelInterfaceMajorVersion == 1);
	printf("client: KFD %u.%u\n", version.KernelInterfaceMajorVersion, version.KernelInterfaceMinorVersion);

	/* Topology, as ROCr reads it. */
	OK(hsaKmtReleaseSystemProperties());
	OK(hsaKmtAcquireSystemProperties(&sys));
	CHECK(sys.NumNodes == 2);
	for (n = 0; n < sys.NumNodes; n++) {
		HsaNodeProperties p;
		char name[HSA_PUBLIC_NAME_SIZE];
		OK(hsaKmtGetNodeProperties(n, &p));
		ascii(name, p.MarketingName);
		printf("client: node %u: %u CPU cores, %u SIMDs, %u banks, %u caches, %u links, \"%s\" %s\n", n,
		       p.NumCPUCores, p.NumFComputeCores, p.NumMemoryBanks, p.NumCaches, p.NumIOLinks, name,
		       (char *)p.AMDName);

		HsaMemoryProperties *mem = calloc(p.NumMemoryBanks, sizeof(*mem));
		OK(hsaKmtGetNodeMemoryProperties(n, p.NumMemoryBanks, mem));
		HsaCacheProperties *caches = calloc(p.NumCaches, sizeof(*caches));
		OK(hsaKmtGetNodeCacheProperties(n, p.FComputeIdLo, p.NumCaches, caches));
		HsaIoLinkProperties *links = calloc(p.NumIOLinks, sizeof(*links));
		OK(hsaKmtGetNodeIoLinkProperties(n, p.NumIOLinks, links));
		CHECK(p.NumCaches > 0);
		CHECK(p.NumIOLinks > 0 && links[0].NodeFrom == n && links[0].IoLinkType == HSA_IOLINKTYPE_PCIEXPRESS);
		if (p.NumFComputeCores == 0) {
			CHECK(p.NumCPUCores > 0 && mem[0].HeapType == HSA_HEAPTYPE_SYSTEM && mem[0].SizeInBytes > 0);
			CHECK(caches[0].CacheType.ui32.CPU == 1);
		} else {
			gpu = n;
			CHECK(p.NumFComputeCores == 416 && p.NumSIMDPerCU == 4 && p.WaveFrontSize == 64);
			CHECK(p.VendorId == 0x1002 && p.DeviceId == 0x740F);
			CHECK(p.EngineId.ui32.Major == 9 && p.EngineId.ui32.Minor == 0 && p.EngineId.ui32.Stepping == 10);
			CHECK(strcmp((char *)p.AMDName, "Aldebaran") == 0);
			CHECK(p.DrmRenderMinor == 128 && p.LocalMemSize == 0);
			CHECK(p.NumMemoryBanks == 5);
			CHECK(mem[0].HeapType == HSA_HEAPTYPE_FRAME_BUFFER_PUBLIC && mem[0].SizeInBytes == 16ULL << 30);
			CHECK(mem[1].HeapType == HSA_HEAPTYPE_GPU_LDS && mem[2].HeapType == HSA_HEAPTYPE_GPU_SCRATCH);
			CHECK(mem[3].HeapType == HSA_HEAPTYPE_DEVICE_SVM && mem[4].HeapType == HSA_HEAPTYPE_MMIO_REMAP);
			CHECK(caches[0].CacheType.Value == 9); /* Data | HSACU: what ROCr insists on */
			CHECK(links[0].NodeTo == 0);
		}
		free(mem);
		free(caches);
		free(links);
	}
	CHECK(gpu == 1);
	CHECK(hsaKmtGetNodeProperties(7, &(HsaNodeProperties){0}) == HSAKMT_STATUS_INVALID_NODE_UNIT);

	HsaClockCounters clocks;
	OK(hsaKmtGetClockCounters(gpu, &clocks));
	CHECK(clocks.GPUClockCounter > 0 && clocks.SystemClockFrequencyHz > 0);
	HSAint32 xnack = 7;
	OK(hsaKmtGetXNACKMode(&xnack));
	CHECK(xnack == 0);

	/* VRAM, host-visible, mapped on the GPU node. */
	HsaMemFlags vflags = {0};
	vflags.ui32.NonPaged = 1;
	vflags.ui32.HostAccess = 1;
	void *vram = NULL;
	OK(hsaKmtAllocMemory(gpu, 2 << 20, vflags, &vram));
	CHECK(vram != NULL);
	memset(vram, 0xAB, 2 << 20);
	HSAuint64 alt = 1;
	HsaMemMapFlags mflags = {0};
	OK(hsaKmtMapMemoryToGPUNodes(vram, 2 << 20, &alt, mflags, 1, &gpu));
	CHECK(alt == 0);
	HsaPointerInfo info;
	OK(hsaKmtQueryPointerInfo((char *)vram + 4096, &info));
	CHECK(info.Type == HSA_POINTER_ALLOCATED && info.Node == gpu && info.GPUAddress == (HSAuint64)vram);
	CHECK(info.SizeInBytes == 2 << 20 && info.NMappedNodes == 1 && info.MappedNodes[0] == gpu);
	OK(hsaKmtSetMemoryUserData(vram, (void *)0x1234));
	OK(hsaKmtQueryPointerInfo(vram, &info));
	CHECK(info.UserData == (void *)0x1234);
	CHECK(hsaKmtQueryPointerInfo((void *)0x1000, &info) == HSAKMT_STATUS_ERROR && info.Type == HSA_POINTER_UNKNOWN);
	/* IPC: the handle imported (here in the same process, at another address) is the same
	 * memory; it outlives the exporter's buffer; a forged handle imports nothing. */
	HsaSharedMemoryHandle share, forged;
	OK(hsaKmtShareMemory(vram, 2 << 20, &share));
	void *imported = NULL;
	HSAuint64 imported_size = 0;
	OK(hsaKmtRegisterSharedHandle(&share, &imported, &imported_size));
	CHECK(imported != NULL && imported != vram && imported_size == 2 << 20);
	CHECK(((volatile unsigned char *)imported)[(1 << 20) + 3] == 0xAB);
	((volatile HSAuint32 *)imported)[1000] = 0x5eed;
	CHECK(((volatile HSAuint32 *)vram)[1000] == 0x5eed);
	OK(hsaKmtQueryPointerInfo(imported, &info));
	CHECK(info.Type == HSA_POINTER_REGISTERED_SHARED && info.SizeInBytes == 2 << 20);
	memcpy(&forged, &share, sizeof(forged));
	forged[1] ^= 0x100;
	void *nothing = NULL;
	CHECK(hsaKmtRegisterSharedHandle(&forged, &nothing, &imported_size) == HSAKMT_STATUS_ERROR);
	OK(hsaKmtUnmapMemoryToGPU(vram));
	OK(hsaKmtFreeMemory(vram, 2 << 20));
	CHECK(hsaKmtFreeMemory(vram, 2 << 20) == HSAKMT_STATUS_MEMORY_NOT_REGISTERED);
	CHECK(((volatile HSAuint32 *)imported)[1000] == 0x5eed); /* the import keeps the memory */
	OK(hsaKmtDeregisterMemory(imported));
	CHECK(hsaKmtRegisterSharedHandle(&share, &nothing, &imported_size) == HSAKMT_STATUS_ERROR);

	/* ROCr's scratch: a 4 GiB reservation, backed where it is mapped. */
	HsaMemFlags sflags = {0};
	sflags.ui32.Scratch = 1;
	sflags.ui32.HostAccess = 1;
	void *scratch = NULL;
	OK(hsaKmtAllocMemory(gpu, 4ULL << 30, sflags, &scratch));
	OK(hsaKmtMapMemoryToGPU(scratch, 1 << 20, &alt));
	OK(hsaKmtUnmapMemoryToGPU(scratch));
	OK(hsaKmtFreeMemory(scratch, 4ULL << 30));

	/* System memory for the queue: ring, amd_queue_t, a signal. */
	HsaMemFlags hflags = {0};
	hflags.ui32.HostAccess = 1;
	hflags.ui32.ExecuteAccess = 1;
	void *ring = NULL, *desc = NULL, *sigmem = NULL;
	OK(hsaKmtAllocMemory(0, 4096, hflags, &ring));
	OK(hsaKmtAllocMemory(0, 4096, hflags, &desc));
	OK(hsaKmtAllocMemory(0, 4096, hflags, &sigmem));
	OK(hsaKmtMapMemoryToGPUNodes(ring, 4096, &alt, mflags, 1, &gpu));
	OK(hsaKmtMapMemoryToGPUNodes(desc, 4096, &alt, mflags, 1, &gpu));
	OK(hsaKmtMapMemoryToGPUNodes(sigmem, 4096, &alt, mflags, 1, &gpu));

	/* A signal event: its mailbox is a slot of the event page, mapped here. */
	HsaEventDescriptor edesc = {0};
	edesc.EventType = HSA_EVENTTYPE_SIGNAL;
	edesc.NodeId = gpu;
	HsaEvent *event = NULL;
	OK(hsaKmtCreateEvent(&edesc, false, false, &event));
	CHECK(event != NULL && event->EventData.HWData2 != 0);
	CHECK(*(volatile HSAuint64 *)event->EventData.HWData2 == ~0ULL);
	double t0 = now_ms();
	CHECK(hsaKmtWaitOnEvent(event, 100) == HSAKMT_STATUS_WAIT_TIMEOUT);
	double waited = now_ms() - t0;
	printf("client: a 100 ms wait timed out after %.1f ms\n", waited);
	CHECK(waited >= 95);
	OK(hsaKmtSetEvent(event));
	OK(hsaKmtWaitOnEvent(event, 1000));
	pthread_t thread;
	void *waited_status;
	CHECK(pthread_create(&thread, NULL, waiter, event) == 0);
	usleep(50 * 1000);
	OK(hsaKmtSetEvent(event));
	CHECK(pthread_join(thread, &waited_status) == 0);
	CHECK((long)waited_status == HSAKMT_STATUS_SUCCESS);

	/* A memory-fault event, as ROCr makes one at start. */
	HsaEventDescriptor fdesc = {0};
	fdesc.EventType = HSA_EVENTTYPE_MEMORY;
	fdesc.NodeId = gpu;
	HsaEvent *fault = NULL;
	OK(hsaKmtCreateEvent(&fdesc, true, false, &fault));
	CHECK(hsaKmtSetEvent(fault) == HSAKMT_STATUS_ERROR);
	HsaEvent *both[2] = {event, fault};
	CHECK(hsaKmtWaitOnMultipleEvents(both, 2, false, 0) == HSAKMT_STATUS_WAIT_TIMEOUT);

	/* An AQL queue over the ring, its pointers in the amd_queue_t. */
	amd_queue_t *q = desc;
	memset(q, 0, sizeof(*q));
	for (int i = 0; i < 4096 / 64; i++)
		((hsa_barrier_and_packet_t *)ring)[i].header = HSA_PACKET_TYPE_INVALID;
	HsaQueueResource res = {0};
	res.Queue_read_ptr_aql = (HSAuint64 *)&q->read_dispatch_id;
	res.Queue_write_ptr_aql = (HSAuint64 *)&q->write_dispatch_id;
	OK(hsaKmtCreateQueue(gpu, HSA_QUEUE_COMPUTE_AQL, 100, HSA_QUEUE_PRIORITY_NORMAL, ring, 4096, NULL, &res));
	CHECK(res.QueueId != 0 && res.Queue_DoorBell_aql != NULL);

	/* A barrier packet whose completion signal has the event's mailbox. */
	amd_signal_t *sig = sigmem;
	memset(sig, 0, sizeof(*sig));
	sig->kind = AMD_SIGNAL_KIND_USER;
	sig->value = 1;
	sig->event_mailbox_ptr = event->EventData.HWData2;
	sig->event_id = event->EventId;
	hsa_barrier_and_packet_t *pkt = ring;
	memset((char *)pkt + 4, 0, 60);
	pkt->completion_signal.handle = (uint64_t)sig;
	uint16_t header = HSA_PACKET_TYPE_BARRIER_AND << HSA_PACKET_HEADER_TYPE |
			  HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE;
	__atomic_store_n(&pkt->header, header, __ATOMIC_RELEASE);
	__atomic_store_n(&q->write_dispatch_id, 1, __ATOMIC_RELEASE);
	__atomic_store_n(res.Queue_DoorBell_aql, 0, __ATOMIC_RELEASE);
	OK(hsaKmtWaitOnEvent(event, 5000));
	CHECK(__atomic_load_n(&sig->value, __ATOMIC_ACQUIRE) == 0);
	CHECK(__atomic_load_n(&q->read_dispatch_id, __ATOMIC_ACQUIRE) == 1);
	printf("client: a barrier packet completed its signal and raised event %u\n", event->EventId);

	HSAuint32 mask[4] = {~0u, ~0u, ~0u, 0xff};
	OK(hsaKmtSetQueueCUMask(res.QueueId, 128, mask));
	OK(hsaKmtUpdateQueue(res.QueueId, 100, HSA_QUEUE_PRIORITY_HIGH, ring, 4096, NULL));
	/* The GPU's global wave sync resources: one queue of the process holds them. */
	HSAuint32 first = 99;
	OK(hsaKmtAllocQueueGWS(res.QueueId, 1, &first));
	CHECK(first == 0);

	/* SVM: refused over a mapped buffer (EADDRINUSE); over malloc'd memory the attributes
	 * hold, locations as node ids, ACCESS answered in its type. */
	HSA_SVM_ATTRIBUTE attr = {HSA_SVM_ATTR_ACCESS, gpu};
	CHECK(hsaKmtSVMSetAttr(ring, 4096, 1, &attr) == HSAKMT_STATUS_ERROR);
	void *host = aligned_alloc(4096, 2 * 4096);
	CHECK(host != NULL);
	HSA_SVM_ATTRIBUTE set[2] = {{HSA_SVM_ATTR_ACCESS, gpu}, {HSA_SVM_ATTR_PREFERRED_LOC, gpu}};
	OK(hsaKmtSVMSetAttr(host, 2 * 4096, 2, set));
	HSA_SVM_ATTRIBUTE get[3] = {{HSA_SVM_ATTR_ACCESS, gpu}, {HSA_SVM_ATTR_PREFERRED_LOC, 0},
				    {HSA_SVM_ATTR_GRANULARITY, 0}};
	OK(hsaKmtSVMGetAttr(host, 2 * 4096, 3, get));
	CHECK(get[0].type == HSA_SVM_ATTR_ACCESS && get[1].value == gpu && get[2].value == 9);
	HSA_SVM_ATTRIBUTE off = {HSA_SVM_ATTR_NO_ACCESS, gpu};
	OK(hsaKmtSVMSetAttr(host, 2 * 4096, 1, &off));
	OK(hsaKmtSVMGetAttr(host, 4096, 1, get));
	CHECK(get[0].type == HSA_SVM_ATTR_NO_ACCESS);
	free(host);
	printf("client: SVM attributes set and read back\n");

	/* What the device lacks. */
	CHECK(hsaKmtRuntimeEnable(NULL, false) == HSAKMT_STATUS_NOT_SUPPORTED);
	HsaGraphicsResourceInfo gfx;
	/* libhsakmt's status when the driver's GET_DMABUF_INFO fails. */
	CHECK(hsaKmtRegisterGraphicsHandleToNodes(3, &gfx, 1, &gpu) == HSAKMT_STATUS_ERROR);

	/* ROCr's shutdown order. */
	OK(hsaKmtDestroyQueue(res.QueueId));
	OK(hsaKmtDestroyEvent(fault));
	OK(hsaKmtDestroyEvent(event));
	void *bufs[3] = {ring, desc, sigmem};
	for (int i = 0; i < 3; i++) {
		OK(hsaKmtUnmapMemoryToGPU(bufs[i]));
		OK(hsaKmtFreeMemory(bufs[i], 4096));
	}
	CHECK(hsaKmtRuntimeDisable() == HSAKMT_STATUS_NOT_SUPPORTED);
	OK(hsaKmtReleaseSystemProperties());
	OK(hsaKmtCloseKFD());
	CHECK(hsaKmtCloseKFD() == HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED);
	CHECK(hsaKmtGetVersion(&version) == HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED);
	printf("client: ok\n");
	return 0;
}
