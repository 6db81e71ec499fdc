//! A process's own small memory besides the buffers a workload maps: the program's data and
//! bss, the heap, the shared libraries' writable segments, the main thread's stack and one stack
//! per thread. The scanner visits these VMAs too, and from 6.4 the PID filter treats the ones a
//! scanning thread never faults in (the main thread's stack, the other threads' stacks, data
//! only the main thread wrote) as inactive: since 6.7 each costs the scanner a window of its
//! own per pass (the forced scan of f169c62ff7cd), and a page the main thread touched on one
//! node can be remote for a worker on another.
//!
//! Two layouts (`[[workload]] image`): `numaw`, the static C program of `numasim validate`, as
//! its /proc/PID/maps and numa_maps read in the VM (docs/realkernel.md); `glibc`, a dynamically
//! linked C program (the benchmarks the experiments reproduce), whose libraries are mapped at
//! exec at the top of the mmap area, above the buffers. `none` maps nothing (unit tests).

use crate::kernel::Kernel;
use crate::mm::types::{VM_EXEC, VM_IO, VM_NOHUGEPAGE, VM_PFNMAP, VM_READ, VM_WRITE};
use crate::variants::VdsoPlacement;

/// Image VMAs are mapped with base pages only (thread stacks are MAP_STACK, VM_NOHUGEPAGE since
/// c4608d1bf7c6; the others are too small or unaligned for a THP).
const IMAGE_FLAGS: u32 = VM_READ | VM_WRITE | VM_NOHUGEPAGE;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ImagePreset {
    None,
    Numaw,
    Glibc,
}

impl ImagePreset {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Self::None),
            "numaw" => Some(Self::Numaw),
            "glibc" => Some(Self::Glibc),
            _ => None,
        }
    }
}

/// One writable VMA of the image: its size and the pages the main thread touches at exec.
#[derive(Debug, Clone, Copy)]
struct ImageVma {
    kib: u64,
    touched: u64,
    /// Read by the worker threads at every pass (the heap holding their argument structs).
    shared: bool,
}

const fn vma(kib: u64, touched: u64) -> ImageVma {
    ImageVma { kib, touched, shared: false }
}

/// The image of a preset: below the buffers (data, bss, heap), above them (libraries), the main
/// thread's stack at the top, and each thread's stack (with a PROT_NONE guard page below it).
struct Layout {
    low: &'static [ImageVma],
    libs: &'static [ImageVma],
    stack: ImageVma,
    thread_stack_kib: u64,
    /// Thread stacks go above the buffers (numaw's 2 MiB-aligned buffers leave a hole there) or
    /// below them (top-down mmap after the buffers).
    thread_stacks_above: bool,
    /// The last entry of `libs` is the ELF interpreter's (ld.so), which exec maps before the vDSO.
    interp: bool,
}

// numaw in the VM (6.12, numa01 2 x 2 threads): .data 12 KiB (3 pages), .bss 2744 KiB (6),
// [heap] 136 KiB (2), [stack] 132 KiB (5), thread stacks 256 KiB + guard (1 page, written by
// the creating thread: the pthread struct and TLS sit at its top).
const NUMAW: Layout =
    Layout { low: &[vma(12, 3), vma(2744, 6), ImageVma { kib: 136, touched: 2, shared: true }], libs: &[], stack: vma(132, 5), thread_stack_kib: 256, thread_stacks_above: true, interp: false };

// A glibc x86-64 program (a pthread test program's /proc/PID/maps on Debian bookworm, glibc
// 2.36, plus libnuma's .data as autonuma-benchmark links it): the program's .data and [heap]
// below the buffers; libnuma .data, libc .data 8 KiB and .bss 52 KiB, an 8 KiB anonymous
// mapping (the main thread's TLS) and ld.so's .data above them; 8 MiB thread stacks (the
// default RLIMIT_STACK) below the buffers. Resident pages are not measured: one or two per VMA.
// autonuma-benchmark's threads get their buffer pointer as the thread argument: no heap reads.
const GLIBC: Layout =
    Layout { low: &[vma(4, 1), vma(132, 2)], libs: &[vma(4, 1), vma(8, 2), vma(52, 2), vma(8, 1), vma(8, 2)], stack: vma(132, 4), thread_stack_kib: 8192, thread_stacks_above: false, interp: true };

fn layout(p: ImagePreset) -> Option<&'static Layout> {
    match p {
        ImagePreset::None => None,
        ImagePreset::Numaw => Some(&NUMAW),
        ImagePreset::Glibc => Some(&GLIBC),
    }
}

/// The image VMAs of one process and who touches what.
#[derive(Debug, Clone, Default)]
pub struct Image {
    /// (VMA, pages the main thread touches at exec).
    pub main_pages: Vec<(usize, u64)>,
    /// The heap VMA the threads read at every pass.
    pub shared_heap: Option<usize>,
    /// Thread stacks not yet given to a thread, in address order: the next thread created
    /// takes the highest (top-down mmap).
    pub free_stacks: Vec<usize>,
    /// The threads the process will create, and the layout.
    pub threads: usize,
    pub preset: Option<ImagePreset>,
    /// Index of the first VMA the workload mapped itself (its buffer).
    pub first_buffer: usize,
}

impl Kernel {
    fn mmap_image(&mut self, mm: usize, pages: u64, flags: u32) -> usize {
        let v = self.mms[mm].mmap_anon(pages, flags);
        self.mms[mm].vmas[v].image = true;
        v
    }

    /// exec: the program's data, bss and heap, below the buffers the workload maps next; with
    /// stacks below the buffers, one per thread of the process (`threads`).
    // fs/binfmt_elf.c: load_elf_binary; mm/mmap.c: do_brk_flags
    pub fn map_image_low(&mut self, mm: usize, preset: ImagePreset, threads: usize) {
        let Some(l) = layout(preset) else { return };
        let mut img = Image { threads, preset: Some(preset), ..Default::default() };
        for v in l.low {
            let i = self.mmap_image(mm, v.kib / 4, IMAGE_FLAGS);
            img.main_pages.push((i, v.touched));
            if v.shared {
                img.shared_heap = Some(i);
            }
        }
        if !l.thread_stacks_above {
            // top-down: the first thread created gets the highest stack (popped first)
            img.free_stacks = self.map_thread_stacks(mm, l, threads);
        }
        img.first_buffer = self.mms[mm].vmas.len();
        self.images.insert(mm, img);
    }

    /// After the workload's buffers: the libraries' writable segments and, for numaw, the
    /// thread stacks; the main thread's stack on top.
    pub fn map_image_high(&mut self, mm: usize) {
        let Some(mut img) = self.images.remove(&mm) else { return };
        let (Some(l), threads) = (img.preset.and_then(layout), img.threads) else { return };
        if l.thread_stacks_above {
            img.free_stacks = self.map_thread_stacks(mm, l, threads);
        }
        // in address order: the libraries ld.so maps, [vdso] (6.9+), ld.so, [stack], [vdso] (before)
        let (libs, interp) = l.libs.split_at(l.libs.len() - usize::from(l.interp));
        let vdso_in_mmap = self.variants().vdso_placement >= VdsoPlacement::V6_9;
        for v in libs {
            let i = self.mmap_image(mm, v.kib / 4, IMAGE_FLAGS);
            img.main_pages.push((i, v.touched));
        }
        if vdso_in_mmap {
            self.map_vdso(mm);
        }
        for v in interp {
            let i = self.mmap_image(mm, v.kib / 4, IMAGE_FLAGS);
            img.main_pages.push((i, v.touched));
        }
        let i = self.mmap_image(mm, l.stack.kib / 4, IMAGE_FLAGS);
        img.main_pages.push((i, l.stack.touched));
        if !vdso_in_mmap {
            self.map_vdso(mm);
        }
        self.images.insert(mm, img);
        // the process's first task is the exec'd program: it sets its image up first
        if let Some(main) = self.tasks.iter().position(|x| x.mm == mm && x.parent.is_none()) {
            self.tasks[main].program.insert(0, super::Op::Exec);
        }
    }

    /// exec's special mappings: [vvar] (16 KiB of kernel data, VM_IO | VM_PFNMAP: never
    /// scanned) and [vdso] (8 KiB of code: scanned, but its pages are mapped by every process
    /// and never made PROT_NONE, so no hint fault ever marks a task in its PID window). Since
    /// 6.7 a VMA the PID filter refused is force-scanned, one per window, once the window has
    /// reached the last VMA: the vDSO makes every pass one window longer.
    // arch/x86/entry/vdso/vma.c: map_vdso (3c6539b4c177, 6.9: in the mmap region)
    fn map_vdso(&mut self, mm: usize) {
        self.mmap_image(mm, 4, VM_READ | VM_IO | VM_PFNMAP);
        self.mmap_image(mm, 2, VM_READ | VM_EXEC);
    }

    /// `threads` stacks, each with a PROT_NONE guard page below it; returns the stack VMAs in
    /// address order.
    // nptl/allocatestack.c: allocate_stack (mmap, then mprotect of the guard)
    fn map_thread_stacks(&mut self, mm: usize, l: &Layout, threads: usize) -> Vec<usize> {
        (0..threads)
            .map(|_| {
                self.mmap_image(mm, 1, 0);
                self.mmap_image(mm, l.thread_stack_kib / 4, IMAGE_FLAGS)
            })
            .collect()
    }

    /// The main thread of an exec'd program touches its image (dynamic linking, libc start-up,
    /// its stack) on the CPU it starts on, paid from the budget `b`; these pages then stay
    /// where they were first touched, and stay hot while it runs.
    pub fn touch_image_at_exec(&mut self, t: usize, b: &mut f64) {
        let mm = self.tasks[t].mm;
        let Some(img) = self.images.get(&mm) else { return };
        let (pages, heap) = (img.main_pages.clone(), img.shared_heap);
        let stack = pages.last().map(|p| p.0);
        for (vma, n) in pages {
            for i in 0..n {
                self.access_page(t, vma, i, true, b);
                // its stack and heap stay in use; data and libraries were set up once
                if Some(vma) == stack || Some(vma) == heap {
                    self.tasks[t].hot.push((vma, i, true));
                }
            }
        }
    }

    /// pthread_create: the creator writes the new thread's struct pthread and TLS at the top of
    /// its stack (first touch on the creator's node, paid from its budget `b`); the thread then
    /// keeps that page and the heap page holding its arguments hot.
    // nptl/pthread_create.c: allocate_stack, __pthread_create_2_1
    pub fn image_clone(&mut self, parent: usize, child: usize, b: &mut f64) {
        let mm = self.tasks[parent].mm;
        if self.tasks[child].mm != mm {
            return;
        }
        let Some(img) = self.images.get_mut(&mm) else { return };
        let Some(stack) = img.free_stacks.pop() else { return };
        let heap = img.shared_heap;
        let top = self.mms[mm].vmas[stack].pt.len() - 1;
        self.access_page(parent, stack, top, true, b);
        self.tasks[child].hot.push((stack, top, true));
        if let Some(h) = heap {
            self.tasks[child].hot.push((h, 0, false));
        }
    }

    /// The next clone of an `Op::Spawn`: one child per step, its cost paid by the creator from
    /// its budget `b`, so that the clones of concurrent creators interleave in time. A fork
    /// copies the page tables (dup_mmap) before the child is woken; the parent then returns to
    /// its stack and heap and copies the pages it stores to. A thread's stack top is written
    /// before its clone. The clone's instant in the tick orders `wake_up_new_task` (one that
    /// overruns the tick is placed at its end, the rest of its cost paid as a debt next tick).
    /// Returns false (and is ready for the next `Op::Spawn`) when every child is cloned.
    // kernel/fork.c: kernel_clone -> copy_process, wake_up_new_task; nptl/pthread_create.c
    pub fn clone_next_child(&mut self, t: usize, b: &mut f64) -> bool {
        let Some(&c) = self.tasks[t].children.get(self.tasks[t].spawned_children) else {
            self.tasks[t].spawned_children = 0;
            return false;
        };
        self.tasks[t].spawned_children += 1;
        let fork = self.tasks[c].mm != self.tasks[t].mm;
        let cost = self.cost.clone_ns + if fork { self.dup_mmap(t, c) } else { 0.0 };
        self.charge_sys(t, cost, b);
        self.image_clone(t, c, b);
        self.spawned.push((self.tick_ns as f64 - *b, c));
        if fork {
            self.touch_hot_pages(t, b);
        }
        true
    }

    /// A running thread touches the small pages it keeps hot (its stack, its arguments) at the
    /// start of its tick, taking any fault a scan left there, paid from its budget `b`.
    pub fn touch_hot_pages(&mut self, t: usize, b: &mut f64) {
        for k in 0..self.tasks[t].hot.len() {
            let (vma, idx, write) = self.tasks[t].hot[k];
            if !self.access_page(t, vma, idx, write, b) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::kernel::Kernel;
    use crate::mm::types::{VM_READ, VM_WRITE};
    use crate::scenario::parse_scenario;
    use crate::simulation::Simulation;
    use crate::testutil::SMALL;

    /// SMALL's machine with one numa02 process of `threads` threads, 256 MiB, `image`.
    fn kernel(version: &str, image: &str, threads: usize) -> Simulation {
        let text = SMALL.replace("image = \"none\"", &format!("image = \"{image}\"")).replace("threads = 4", &format!("threads = {threads}")).replace("size_mib = 64", "size_mib = 256");
        Simulation::new(&parse_scenario(&format!("[kernel]\nversion = \"{version}\"\n{text}")).unwrap()).unwrap()
    }

    fn writable(k: &Kernel, v: usize) -> bool {
        k.mms[0].vmas[v].flags & (VM_READ | VM_WRITE) == VM_READ | VM_WRITE
    }

    /// numaw's address space as read in the VM: data, bss and heap below the buffer; each
    /// thread's stack (with a PROT_NONE guard below it) above; the main thread's stack on top.
    /// The main thread first-touches its image when it starts; pthread_create first-touches
    /// the top page of the new thread's stack on the creator's node.
    #[test]
    fn numaw_layout_and_first_touches() {
        let mut sim = kernel("6.12", "numaw", 2);
        let k = &sim.k;
        let sizes: Vec<u64> = k.mms[0].vmas.iter().map(|v| v.pt.len()).collect();
        assert_eq!(sizes, vec![3, 686, 34, 65536, 1, 64, 1, 64, 4, 2, 33], "data, bss, heap, buffer, 2 x (guard, stack), [vvar], [vdso], [stack]");
        assert!(!writable(k, 4) && writable(k, 5), "a guard page, then the stack");
        while sim.k.tasks.iter().filter(|t| t.runnable() && t.parent.is_some()).count() < 2 {
            sim.step().unwrap();
        }
        let k = &sim.k;
        let main_node = k.cpu_node(k.tasks[0].cpu) as u8;
        assert_eq!(k.mms[0].vmas[0].pt.nid(0), main_node, "data touched by main");
        for stack in [5, 7] {
            let top = k.mms[0].vmas[stack].pt.len() - 1;
            assert_eq!(k.mms[0].vmas[stack].pt.nid(top), main_node, "the creator touched the stack top");
        }
        let hot: Vec<_> = k.tasks.iter().filter(|t| t.parent.is_some()).map(|t| t.hot.len()).collect();
        assert_eq!(hot, vec![2, 2], "each thread keeps its stack and the heap hot");
    }

    /// arch/x86/entry/vdso/vma.c: map_vdso — exec maps [vvar] (VM_IO | VM_PFNMAP: not
    /// migratable, never scanned) and [vdso]; above the stack before 6.9, in the mmap region
    /// since 3c6539b4c177 (below the stack and ld.so, above what the program maps later).
    #[test]
    fn vdso_above_the_stack_before_6_9_and_in_the_mmap_region_since() {
        use crate::mm::types::{VM_IO, VM_PFNMAP};
        let sizes = |version: &str, image: &str| -> Vec<u64> { kernel(version, image, 2).k.mms[0].vmas.iter().map(|v| v.pt.len()).collect() };
        assert_eq!(sizes("6.1", "numaw")[8..], [33, 4, 2], "[stack], [vvar], [vdso]");
        assert_eq!(sizes("6.9", "numaw")[8..], [4, 2, 33], "[vvar], [vdso], [stack]");
        let glibc = sizes("6.12", "glibc");
        assert_eq!(glibc[glibc.len() - 4..], [4, 2, 2, 33], "[vvar], [vdso], ld.so's data, [stack]");
        let k = kernel("6.12", "numaw", 2).k;
        assert_ne!(k.mms[0].vmas[8].flags & (VM_IO | VM_PFNMAP), 0);
        assert!(k.mms[0].vmas[8..10].iter().all(|v| v.pt.node_totals().iter().sum::<u64>() == 0), "no page of theirs is the process's");
    }

    /// kernel/fork.c: kernel_clone — a creator pays for each clone (clone_ns of system time)
    /// before it makes the next, so 4 clones of 1.5 ms each spread over two ticks of 4 ms
    /// (HZ 250) or more, and the creator's system time holds all four.
    #[test]
    fn each_clone_costs_its_creator_in_turn() {
        use crate::sched::task::TaskState;
        let text = SMALL.replace("clone_ns = 0.0", "clone_ns = 1500000.0");
        let mut sim = Simulation::new(&parse_scenario(&text).unwrap()).unwrap();
        let started = |sim: &Simulation| sim.k.tasks.iter().filter(|t| t.parent.is_some() && t.state != TaskState::NotStarted).count();
        let mut ticks_with_clones = 0;
        while started(&sim) < 4 {
            let before = started(&sim);
            assert!(sim.step().unwrap());
            if started(&sim) > before {
                ticks_with_clones += 1;
                assert!(started(&sim) - before <= 3, "at most three 1.5 ms clones in a 4 ms tick");
            }
        }
        assert!(ticks_with_clones >= 2, "the clones spread over ticks");
        let main = sim.k.tasks.iter().position(|t| t.parent.is_none()).unwrap();
        assert!(sim.k.tasks[main].sys_ns >= 4.0 * 1.5e6, "{}", sim.k.tasks[main].sys_ns);
    }

    /// glibc: 8 MiB thread stacks below the buffer. task_numa_work charges a chunk with one
    /// updated PTE at its full virtual size, so 32 stacks with a page each use a whole 256 MiB
    /// window and the buffer behind them waits for the next one. On 6.1 the stacks whose page
    /// still waits in the creator's LRU add batch are passed by (page_count != 1) and cost
    /// nothing: the window reaches that much further into the buffer.
    // kernel/sched/fair.c: task_numa_work ("if (nr_pte_updates) pages -= (end - start) >> PAGE_SHIFT")
    #[test]
    fn thread_stacks_cost_their_virtual_size_of_a_window() {
        for version in ["6.12", "6.1"] {
            let mut sim = kernel(version, "glibc", 32);
            while sim.k.tasks.iter().filter(|t| t.runnable() && t.parent.is_some()).count() < 32 {
                sim.step().unwrap();
            }
            let k = &mut sim.k;
            let t = k.tasks.iter().position(|x| x.parent.is_some()).unwrap();
            let buffer = k.mms[0].vmas.iter().position(|v| v.pt.len() == 65536).unwrap();
            assert_eq!(k.mms[0].vmas[..buffer].iter().filter(|v| v.pt.len() == 2048).count(), 32, "stacks below the buffer");
            // every populated page present again (as after the threads touched them)
            for v in &mut k.mms[0].vmas {
                for i in 0..v.pt.len() {
                    if v.pt.protnone(i) {
                        v.pt.make_present(i, true);
                    }
                }
            }
            let batched = k.mms[0].vmas[..buffer].iter().filter(|v| v.pt.len() == 2048 && v.pt.lru_batched(2047)).count() as u64;
            k.mms[0].numa_next_scan = 1;
            k.mms[0].numa_scan_offset = 0;
            k.task_numa_work(t);
            let protected = |k: &Kernel, v: usize| (0..k.mms[0].vmas[v].pt.len()).filter(|&i| k.mms[0].vmas[v].pt.protnone(i)).count() as u64;
            let reached = if version == "6.1" { batched * 2048 } else { 0 };
            assert!(version == "6.12" || batched > 0, "the last stacks created are still batched");
            assert_eq!(protected(k, buffer), reached, "{version}: the window ended in the stacks");
            k.mms[0].numa_next_scan = 1;
            k.task_numa_work(t);
            assert!(protected(k, buffer) > 60000, "{version}: the next window covers the buffer");
        }
    }

    /// f169c62ff7cd (6.7): with budget left at the end of the VMA list and VMAs refused by the
    /// PID filter, task_numa_work scans one of them and stops without finishing the pass. For a
    /// numaw process (64 MiB) whose scanning thread never touches the main thread's data, bss
    /// and stack nor the other thread's stack, 6.1 finishes a pass in one window; 6.12 takes
    /// four: the first forces the lowest refused VMA (data), the second restarts above the
    /// highest VMA completed in the pass (SEQ_COMPLETED moved the offset past it) and forces
    /// [vdso], the third the main thread's stack, the fourth finds no VMA left and wraps. bss
    /// and the other thread's stack wait for the starvation rule.
    #[test]
    fn inactive_vmas_cost_a_window_each_from_6_7() {
        for (version, windows_per_pass) in [("6.1", 1), ("6.12", 4)] {
            let text = SMALL.replace("image = \"none\"", "image = \"numaw\"").replace("threads = 4", "threads = 2");
            let mut sim = Simulation::new(&parse_scenario(&format!("[kernel]\nversion = \"{version}\"\n{text}")).unwrap()).unwrap();
            while sim.k.tasks.iter().filter(|t| t.runnable() && t.parent.is_some()).count() < 2 {
                sim.step().unwrap();
            }
            let k = &mut sim.k;
            let t = k.tasks.iter().position(|x| x.parent.is_some()).unwrap();
            let pid = k.tasks[t].pid;
            // past the first two passes; the thread faulted in the buffer, its stack and the heap
            let mut windows = 0;
            k.mms[0].numa_scan_seq = 5;
            k.mms[0].numa_scan_offset = 0;
            for v in &mut k.mms[0].vmas {
                // every VMA seen since the first pass, last scanned in pass 4, no PID recorded
                v.numab = Some(crate::mm::types::VmaNumabState { next_scan: 0, pids_active_reset: u64::MAX, pids_active: [0, 0], start_scan_seq: 0, prev_scan_seq: 4 });
            }
            let own_stack = k.tasks[t].hot[0].0;
            let (heap, buffer) = (2, 3);
            k.now = 100_000_000_000;
            for v in &mut k.mms[0].vmas {
                for i in 0..v.pt.len() {
                    if v.pt.protnone(i) {
                        v.pt.make_present(i, true);
                    }
                }
            }
            while k.mms[0].numa_scan_seq == 5 {
                for v in [heap, buffer, own_stack] {
                    k.vma_set_access_pid_bit(0, v, pid);
                }
                k.mms[0].numa_next_scan = 1;
                k.task_numa_work(t);
                windows += 1;
                assert!(windows < 20);
            }
            // the window that wraps (seq 6) goes on scanning: it is the next pass's first
            assert_eq!(windows, windows_per_pass, "{version}");
        }
    }
}
