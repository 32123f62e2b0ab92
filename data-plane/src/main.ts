console.log("data plane: to be written");
