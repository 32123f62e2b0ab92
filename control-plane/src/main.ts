console.log("control plane: to be written");
