package main

import "syscall"

const syscallSIGTERM = syscall.SIGTERM
