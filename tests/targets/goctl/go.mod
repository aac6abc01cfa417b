module goctl

go 1.19
