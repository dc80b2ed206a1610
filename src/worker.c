/* worker.c: placeholder until implemented */
#include "durable.h"
#include "worker.h"
void durable_worker_register_launcher(void) {}
void durable_worker_install_hooks(void) {}
