// Command delayhop is a network hop with a fixed delay, for kernels without netem
// (CONFIG_NET_SCH_NETEM unset, as on this project's machines). It creates two TUN devices
// and copies every packet from one to the other after --delay, both ways; move one device
// into another network namespace and the two namespaces talk over a link with that one-way
// delay, each side running its own TCP stack as on two hosts:
//
//	delayhop --a dhop0 --b dhop1 --delay 500us &    # prints "ready" once both devices exist
//	ip link set dhop1 netns NS
//	ip addr add 10.213.0.1 peer 10.213.0.2 dev dhop0; ip link set dhop0 mtu 9000 up
//	ip netns exec NS ip addr add 10.213.0.2 peer 10.213.0.1 dev dhop1; ...
//
// It runs until killed. Linux only; needs CAP_NET_ADMIN. results/2026-12-01-reader/run.sh
// uses it to measure the relay's backlog reader with PostgreSQL one hop away.
package main

import (
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	a := flag.String("a", "dhop0", "first TUN device")
	b := flag.String("b", "dhop1", "second TUN device")
	delay := flag.Duration("delay", 500*time.Microsecond, "one-way delay of every packet")
	flag.Parse()
	fa, err := openTun(*a)
	if err == nil {
		var fb *os.File
		if fb, err = openTun(*b); err == nil {
			fmt.Println("ready")
			go pump(fa, fb, *delay)
			pump(fb, fa, *delay)
		}
	}
	fmt.Fprintln(os.Stderr, "delayhop:", err)
	os.Exit(1)
}

// openTun creates the TUN device name (no packet information header).
func openTun(name string) (*os.File, error) {
	fd, err := syscall.Open("/dev/net/tun", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	var ifr struct {
		name  [16]byte
		flags uint16
		_     [22]byte
	}
	copy(ifr.name[:], name)
	ifr.flags = syscall.IFF_TUN | syscall.IFF_NO_PI
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TUNSETIFF, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("create TUN device %s: %w", name, e)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// pump copies packets from src to dst, each delay after it was read, in order.
func pump(src, dst *os.File, delay time.Duration) {
	type packet struct {
		b   []byte
		due time.Time
	}
	q := make(chan packet, 1<<16)
	go func() {
		for p := range q {
			if w := time.Until(p.due); w > 0 {
				ts := syscall.NsecToTimespec(w.Nanoseconds()) // time.Sleep rounds up to ~1 ms here
				for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
				}
			}
			_, _ = dst.Write(p.b) // a packet the device refuses is lost, as on a wire
		}
	}()
	buf := make([]byte, 65536)
	for {
		n, err := src.Read(buf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "delayhop: read:", err)
			os.Exit(1)
		}
		q <- packet{append([]byte(nil), buf[:n]...), time.Now().Add(delay)}
	}
}
